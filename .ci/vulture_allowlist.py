"""Names ``vulture`` (``make lint``) would call unused, reviewed: each group says who uses them.

Read by vulture only, never imported or run. The last group is dead code waiting for the owner of
its file: remove its entry together with the code.
"""

from types import SimpleNamespace

_ = SimpleNamespace()

# parameters a protocol fixes: __exit__'s, a signal handler's, a pytest hook's
_ = (_.exc_type, _.tb, _.signum, _.exitstatus)
# keyword names of AWS calls, kept by the doubles that stand in for boto3 clients
_ = (_.Data, _.FunctionName)
# read by a library: moto's server thread (_server_entry), Powertools (the Lambda context), io
# (writable), Selenium (binary_location), the X-Ray SDK's emitter (send_entity, set_daemon_address)
_ = (_._server_entry, _.memory_limit_in_mb, _.invoked_function_arn, _.function_version, _.log_stream_name)
_ = (_.writable, _.binary_location, _.send_entity, _.set_daemon_address, _.address)
# read by uvicorn's serve loop (the demo MCP server's stop)
_ = (_.should_exit,)
# hypothesis' RuleBasedStateMachine calls teardown after each run
_ = (_.teardown,)
# a reference that keeps a running asyncio task from being garbage collected
_ = (_._close_task,)
# fields of the sessions API's bodies, set by keyword and serialized (shared/wire/session_api_models.py)
_ = (_.next_cursor, _.connected_since)
# fixtures a test asks for by name only for what they set up
_ = (_.cognito_env, _.no_backoff, _.endpoints)

# ---- dead: for the owner of the file to remove (and then this entry) ----------------------------
# conductor_local/gateway/console.py
_ = (_.origin_allowed,)
# ios-client-stub/voiceide_client/conversation/client.py (written, never read)
_ = (_.restarts,)
# benchmarks/aws_quotas.py, capacity_model.py, speculation.py, token_calibration.py
_ = (_.VERIFIED_ON, _.BEDROCK_GENERAL, _.adjustable, _.needed_for, _.first_setting, _.first_text_ms)
_ = (_.RECORDED_ON, _.SOURCE)
# tests/e2e/test_interruptions.py, tests/handlers/test_fair_sharing.py, test_result_parts.py,
# tests/infra/test_operations.py, code_calls.py
_ = (_.INTERRUPTED_MARK, _.WRITES, _.FRAME_BYTES, _.RATE_ALARMS, _.created_in)
