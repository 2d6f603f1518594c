"""The session reaper: triggered by the table's stream, filtered to the deletions DynamoDB's time to
live makes of sessions' ``STATE`` items (``shared.flows.session_reaper``).

Per record: everything that remains under the expired session's key is deleted. A record that
fails (DynamoDB) is reported as a batch item failure and retried by the event source; a record
that is no such deletion (the filter lets none through) is skipped.
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.data_classes.dynamo_db_stream_event import DynamoDBRecord
from aws_lambda_powertools.utilities.typing import LambdaContext

from lambdas.runtime import PowertoolsMetrics, lambda_entry, logger, session_reaper

REAPED_METRIC = "SessionsReaped"
ITEMS_METRIC = "SessionItemsReaped"

processor = BatchProcessor(event_type=EventType.DynamoDBStreams)


@lambda_entry
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    response = process_partial_response(event=event, record_handler=handle_record, processor=processor, context=context)
    return dict(response)


def handle_record(record: DynamoDBRecord) -> None:
    sink = PowertoolsMetrics()
    for reaped in session_reaper().reap([record.raw_event]):
        sink.count(REAPED_METRIC)
        sink.count(ITEMS_METRIC, reaped.deleted)
        logger.info("expired session reaped", extra={"session_id": reaped.session_id, "items": reaped.deleted})
