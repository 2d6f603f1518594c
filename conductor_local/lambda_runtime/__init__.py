"""The local Lambda: the Invoke endpoint that runs the turn function (asynchronously) and the
tool-deadline function, and its context object.
"""
