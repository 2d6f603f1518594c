"""The local Lambda: the asynchronous Invoke endpoint that runs the turn function, its context
object, and the queue that fires tool-deadline alarms.
"""
