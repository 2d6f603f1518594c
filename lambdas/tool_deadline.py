"""Tool-call deadlines: triggered by the deadline queue (``shared.adapters.deadline_alarms``).

Per message: an alarm not yet due (deadlines past SQS's 15 minute delay) is sent again with the
delay that remains; a due one expires the session's overdue calls (the model hears of the
timeout and goes on) and arms the next pending deadline. A record that fails (DynamoDB, the
management API) is reported as a batch item failure and comes back after the visibility timeout;
a malformed body is dropped (counted), never retried.
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from aws_lambda_powertools.utilities.typing import LambdaContext
from pydantic import ValidationError

from lambdas.runtime import PowertoolsMetrics, deadline_alarms, lambda_entry, logger, service
from shared.adapters.deadline_alarms import DeadlineAlarm, SqsDeadlineAlarms

MALFORMED_METRIC = "DeadlineAlarmsMalformed"
REARMED_METRIC = "DeadlineAlarmsRearmed"
EXPIRED_METRIC = "DeadlineAlarmsHandled"

processor = BatchProcessor(event_type=EventType.SQS)


@lambda_entry
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    response = process_partial_response(event=event, record_handler=handle_record, processor=processor, context=context)
    return dict(response)


def handle_record(record: SQSRecord) -> None:
    sink = PowertoolsMetrics()
    try:
        alarm = DeadlineAlarm.model_validate_json(record.body or "")
    except ValidationError as error:
        logger.error(
            "malformed deadline alarm dropped", extra={"message_id": record.message_id, "errors": error.error_count()}
        )
        sink.count(MALFORMED_METRIC)
        return
    alarms = _alarms()
    if not alarms.is_due(alarm):
        alarms.send(alarm)
        sink.count(REARMED_METRIC)
        return
    next_due = service().expire_tool_calls(alarm.session_id, alarm.endpoint)
    sink.count(EXPIRED_METRIC)
    logger.info("tool deadlines handled", extra={"session_id": alarm.session_id, "next_due_at": next_due})
    if next_due is not None:
        alarms.set_alarm(alarm.session_id, alarm.endpoint, next_due)


def _alarms() -> SqsDeadlineAlarms:
    alarms = deadline_alarms()
    if alarms is None:
        raise RuntimeError("CONDUCTOR_DEADLINE_QUEUE_URL is not set")
    return alarms
