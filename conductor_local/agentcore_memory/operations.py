"""The memory operations of ``bedrock-agentcore``, on a ``MemoryStore``: parameters in (parsed and
checked against the model), the output shape's members out, ``ServiceError`` for the rest.

What each call does beyond the model's constraints:

* Every call names a memory the store serves, else ``ResourceNotFoundException``; so does an
  unknown event (``GetEvent``, ``DeleteEvent``: by actor, session and id) or record (``GetMemoryRecord``,
  ``DeleteMemoryRecord``; a ``namespace`` given must be the record's). ``ListEvents`` of a session
  that has none answers an empty list.
* ``CreateEvent`` wants a ``sessionId``; a ``branch.rootEventId`` must be an event of the same
  session (of another: ``ValidationException`` reason ``EventInOtherSession``; of none: not
  found). Long-term records are extracted from it at once (``extraction``) unless
  ``extractionMode`` is ``SKIP``.
* ``CreateEvent`` and ``BatchCreateMemoryRecords`` are idempotent by ``clientToken``: the same
  token with the same request answers the first answer again and creates nothing; with another
  request, ``ValidationException`` reason ``IdempotentParameterMismatchException``.
* ``ListSessions`` lists an actor's sessions, also one whose events were all deleted (the service
  drops empty sessions a day later), unless ``filter.eventFilter`` is ``HAS_EVENTS``.
* Lists are newest first (events by ``eventTimestamp``, sessions and records by creation);
  ``RetrieveMemoryRecords`` ranks by ``retrieval.score`` (ties: the record written last first) and
  answers at most ``topK`` (10 when not given) records, in pages of ``maxResults``.
* ``ListMemoryRecords`` and ``RetrieveMemoryRecords`` want exactly one of ``namespace`` and
  ``namespacePath``.
* ``BatchCreateMemoryRecords``: each record needs one namespace, and a ``memoryStrategyId`` of the
  memory when it names one (else it fails, ``errorCode`` 400); without one, the strategy whose
  namespace template the namespace fits is the record's (none fits: the record has none).
  ``recordExpirySpecification.recordExpiryDurationDays`` sets ``expiresAt``; an expired record is
  gone. ``BatchDeleteMemoryRecords`` fails an unknown record with ``errorCode`` 404.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from conductor_local.agentcore_memory import extraction
from conductor_local.agentcore_memory.errors import (
    EVENT_IN_OTHER_SESSION,
    IDEMPOTENT_MISMATCH,
    not_found,
    validation_error,
)
from conductor_local.agentcore_memory.pagination import page
from conductor_local.agentcore_memory.retrieval import (
    check_filters,
    in_namespaces,
    metadata_matches,
    namespace_filter,
    score,
    words,
)
from conductor_local.agentcore_memory.store import (
    Event,
    Memory,
    MemoryStore,
    Record,
    Session,
    new_event_id,
    new_record_id,
)
from conductor_local.agentcore_memory.validation import refuse

DEFAULT_TOP_K = 10
Params = dict[str, Any]
Output = dict[str, Any]


def _now() -> datetime:
    return datetime.now(UTC)


def _newest_first(when: datetime, seq: int) -> tuple[float, int]:
    return (-when.timestamp(), -seq)


# ---- idempotency ------------------------------------------------------------------------------------


def _fingerprint(params: Params) -> str:
    kept = {name: value for name, value in params.items() if name != "clientToken"}
    return hashlib.sha256(json.dumps(kept, sort_keys=True, default=str).encode("utf-8")).hexdigest()


def _idempotent(memory: Memory, operation: str, params: Params, run: Callable[[], Output]) -> Output:
    token = params.get("clientToken")
    if token is None:
        return run()
    fingerprint = _fingerprint(params)
    answered = memory.answered.get((operation, token))
    if answered is not None:
        if answered[0] != fingerprint:
            raise validation_error(
                "The clientToken was already used with different request parameters", IDEMPOTENT_MISMATCH
            )
        return answered[1]
    output = run()
    memory.answered[(operation, token)] = (fingerprint, output)
    return output


# ---- events -----------------------------------------------------------------------------------------


def _event(memory: Memory, params: Params) -> Event:
    event = memory.events.get(params["eventId"])
    if event is None or (event.actor_id, event.session_id) != (params["actorId"], params["sessionId"]):
        raise not_found(f"Event not found: {params['eventId']}")
    return event


def _check_branch(memory: Memory, actor_id: str, session_id: str, branch: Mapping[str, Any] | None) -> None:
    root = (branch or {}).get("rootEventId")
    if root is None:
        return
    event = memory.events.get(root)
    if event is None:
        raise not_found(f"Root event not found: {root}")
    if (event.actor_id, event.session_id) != (actor_id, session_id):
        raise validation_error(f"The root event {root} belongs to another session", EVENT_IN_OTHER_SESSION)


def create_event(store: MemoryStore, params: Params) -> Output:
    memory = store.memory(params["memoryId"])
    if params.get("sessionId") is None:
        raise refuse("sessionId", None, "not be null")
    actor_id, session_id = params["actorId"], params["sessionId"]
    _check_branch(memory, actor_id, session_id, params.get("branch"))

    def run() -> Output:
        now = _now()
        seq = store.next_seq()
        when = params["eventTimestamp"]
        event = Event(
            memory.memory_id,
            actor_id,
            session_id,
            new_event_id(when),
            when,
            params["payload"],
            params.get("branch"),
            params.get("metadata"),
            seq,
        )
        memory.events[event.event_id] = event
        memory.sessions.setdefault((actor_id, session_id), Session(actor_id, session_id, now, seq))
        if params.get("extractionMode") != "SKIP":
            variables = (params.get("extractionConfig") or {}).get("namespaceVariables") or {}
            extraction.extract(store, memory, event, variables, now)
        return {"event": event.shape()}

    return _idempotent(memory, "CreateEvent", params, run)


def get_event(store: MemoryStore, params: Params) -> Output:
    return {"event": _event(store.memory(params["memoryId"]), params).shape()}


def delete_event(store: MemoryStore, params: Params) -> Output:
    memory = store.memory(params["memoryId"])
    event = _event(memory, params)
    del memory.events[event.event_id]
    return {"eventId": event.event_id}


def _on_branch(memory: Memory, event: Event, branch: Mapping[str, Any] | None) -> bool:
    if branch is None:
        return True
    if event.branch_name == branch["name"]:
        return True
    if not branch.get("includeParentBranches") or event.branch_name != "main":
        return False
    # the parent's events up to the branch's root: the branch's own events name it
    roots = [
        memory.events.get(other.branch.get("rootEventId", ""))
        for other in memory.events.values()
        if other.branch is not None and other.branch_name == branch["name"]
    ]
    position = (event.event_timestamp, event.seq)
    return any(root is not None and position <= (root.event_timestamp, root.seq) for root in roots)


def list_events(store: MemoryStore, params: Params) -> Output:
    memory = store.memory(params["memoryId"])
    filters = params.get("filter") or {}
    check_filters(filters.get("eventMetadata"), "filter.eventMetadata")
    found = [
        event
        for event in memory.events.values()
        if (event.actor_id, event.session_id) == (params["actorId"], params["sessionId"])
        and _on_branch(memory, event, filters.get("branch"))
        and metadata_matches(event.metadata, filters.get("eventMetadata"))
    ]
    chosen, token = page(found, lambda e: _newest_first(e.event_timestamp, e.seq), params, "ListEvents")
    include = params.get("includePayloads", True)
    return {"events": [event.shape(include) for event in chosen], "nextToken": token}


def list_sessions(store: MemoryStore, params: Params) -> Output:
    memory = store.memory(params["memoryId"])
    with_events = ((params.get("filter") or {}).get("eventFilter")) == "HAS_EVENTS"
    busy = {(event.actor_id, event.session_id) for event in memory.events.values()}
    found = [
        session
        for key, session in memory.sessions.items()
        if session.actor_id == params["actorId"] and (not with_events or key in busy)
    ]
    chosen, token = page(found, lambda s: _newest_first(s.created_at, s.seq), params, "ListSessions")
    summaries = [{"sessionId": s.session_id, "actorId": s.actor_id, "createdAt": s.created_at} for s in chosen]
    return {"sessionSummaries": summaries, "nextToken": token}


# ---- records ----------------------------------------------------------------------------------------


def _live_record(memory: Memory, record_id: str, namespace: str | None) -> Record | None:
    record = memory.records.get(record_id)
    if record is None or record.expired(_now()):
        return None
    if namespace is not None and record.namespace != namespace:
        return None
    return record


def _record(memory: Memory, params: Params) -> Record:
    record = _live_record(memory, params["memoryRecordId"], params.get("namespace"))
    if record is None:
        raise not_found(f"Memory record not found: {params['memoryRecordId']}")
    return record


def _records_in(memory: Memory, params: Params, strategy_id: str | None, filters: Any) -> list[Record]:
    namespace, path = namespace_filter(params)
    now = _now()
    return [
        record
        for record in memory.records.values()
        if not record.expired(now)
        and in_namespaces([record.namespace] if record.namespace else [], namespace, path)
        and (strategy_id is None or record.strategy_id == strategy_id)
        and metadata_matches(record.metadata, filters)
    ]


def list_memory_records(store: MemoryStore, params: Params) -> Output:
    memory = store.memory(params["memoryId"])
    check_filters(params.get("metadataFilters"), "metadataFilters")
    found = _records_in(memory, params, params.get("memoryStrategyId"), params.get("metadataFilters"))
    chosen, token = page(found, lambda r: _newest_first(r.created_at, r.seq), params, "ListMemoryRecords")
    return {"memoryRecordSummaries": [record.summary() for record in chosen], "nextToken": token}


def retrieve_memory_records(store: MemoryStore, params: Params) -> Output:
    memory = store.memory(params["memoryId"])
    criteria = params["searchCriteria"]
    check_filters(criteria.get("metadataFilters"), "searchCriteria.metadataFilters")
    found = _records_in(memory, params, criteria.get("memoryStrategyId"), criteria.get("metadataFilters"))
    query = words(criteria["searchQuery"])
    scored = {record.record_id: score(query, words(record.text)) for record in found}

    def rank(record: Record) -> tuple[float, int]:
        return (-scored[record.record_id], -record.written_seq)

    nearest = sorted(found, key=rank)[: criteria.get("topK", DEFAULT_TOP_K)]
    chosen, token = page(nearest, rank, params, "RetrieveMemoryRecords")
    summaries = [record.summary(scored[record.record_id]) for record in chosen]
    return {"memoryRecordSummaries": summaries, "nextToken": token}


def get_memory_record(store: MemoryStore, params: Params) -> Output:
    return {"memoryRecord": _record(store.memory(params["memoryId"]), params).shape()}


def delete_memory_record(store: MemoryStore, params: Params) -> Output:
    memory = store.memory(params["memoryId"])
    record = _record(memory, params)
    del memory.records[record.record_id]
    return {"memoryRecordId": record.record_id}


def _failed(request_identifier: str | None, code: int, message: str, record_id: str | None = None) -> Output:
    failed: Output = {"status": "FAILED", "errorCode": code, "errorMessage": message}
    if record_id is not None:
        failed["memoryRecordId"] = record_id
    if request_identifier is not None:
        failed["requestIdentifier"] = request_identifier
    return failed


def _expiry(params: Params, now: datetime) -> datetime | None:
    expiry = params.get("recordExpirySpecification")
    if expiry is None:
        return None
    if "action" in expiry:
        raise refuse("recordExpirySpecification.action", expiry["action"], "be absent when creating records")
    return now + timedelta(days=expiry["recordExpiryDurationDays"])


def batch_create_memory_records(store: MemoryStore, params: Params) -> Output:
    memory = store.memory(params["memoryId"])
    identifiers = [record["requestIdentifier"] for record in params["records"]]
    duplicates = sorted({name for name in identifiers if identifiers.count(name) > 1})
    if duplicates:
        raise validation_error(f"Duplicate requestIdentifier in records: {', '.join(duplicates)}")

    def run() -> Output:
        now = _now()
        expires_at = _expiry(params, now)
        succeeded, failed = [], []
        for wanted in params["records"]:
            name = wanted["requestIdentifier"]
            if len(wanted["namespaces"]) != 1:
                failed.append(_failed(name, 400, "A memory record needs exactly one namespace"))
                continue
            namespace = wanted["namespaces"][0]
            strategy_id = wanted.get("memoryStrategyId")
            if strategy_id is not None and memory.strategy(strategy_id) is None:
                failed.append(_failed(name, 400, f"Memory strategy not found: {strategy_id}"))
                continue
            if strategy_id is None:
                strategy = memory.strategy_of_namespace(namespace)
                strategy_id = strategy.strategy_id if strategy is not None else None
            seq = store.next_seq()
            record = Record(
                memory.memory_id,
                new_record_id(),
                wanted["content"]["text"],
                strategy_id,
                namespace,
                now,
                wanted["timestamp"],
                seq,
                seq,
                wanted.get("metadata"),
                expires_at,
            )
            memory.records[record.record_id] = record
            succeeded.append({"memoryRecordId": record.record_id, "status": "SUCCEEDED", "requestIdentifier": name})
        return {"successfulRecords": succeeded, "failedRecords": failed}

    return _idempotent(memory, "BatchCreateMemoryRecords", params, run)


def batch_delete_memory_records(store: MemoryStore, params: Params) -> Output:
    memory = store.memory(params["memoryId"])
    succeeded, failed = [], []
    for wanted in params["records"]:
        record_id = wanted["memoryRecordId"]
        record = _live_record(memory, record_id, wanted.get("namespace"))
        if record is None:
            failed.append(_failed(None, 404, f"Memory record not found: {record_id}", record_id))
            continue
        del memory.records[record_id]
        succeeded.append({"memoryRecordId": record_id, "status": "SUCCEEDED"})
    return {"successfulRecords": succeeded, "failedRecords": failed}


OPERATIONS: dict[str, Callable[[MemoryStore, Params], Output]] = {
    "CreateEvent": create_event,
    "GetEvent": get_event,
    "ListEvents": list_events,
    "DeleteEvent": delete_event,
    "ListSessions": list_sessions,
    "RetrieveMemoryRecords": retrieve_memory_records,
    "ListMemoryRecords": list_memory_records,
    "GetMemoryRecord": get_memory_record,
    "DeleteMemoryRecord": delete_memory_record,
    "BatchCreateMemoryRecords": batch_create_memory_records,
    "BatchDeleteMemoryRecords": batch_delete_memory_records,
}


def run(store: MemoryStore, operation: str, params: Params) -> Output:
    """One operation, under the store's lock."""
    with store.lock:
        return OPERATIONS[operation](store, params)
