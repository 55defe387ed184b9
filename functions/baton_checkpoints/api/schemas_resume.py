"""What `POST /v1/resume` answers: one closed model per `status`, told apart by it, and the builders of each.

The `ready` answer carries the checkpoint's state as the canonical JSON the store holds, spliced in as it is
(`responses.record_json`): its `data` is built once as text (`ready_json`), measured against the caller's budget,
and then either sent as it is or replaced by `omitted`.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field
from pydantic.json_schema import SkipJsonSchema

from baton_checkpoints.api.jsontext import model_json, record_json
from baton_checkpoints.api.schemas import CheckpointRecord, CheckpointSummary, DataEnvelope, ResponseModel
from baton_checkpoints.domain import limits
from baton_checkpoints.domain.checkpoints import Checkpoint
from baton_checkpoints.domain.resume import Decision, Lifted

_LIFTED_ONLY = " Present only when the checkpoint's format is opencheckpoint/0.1 (possibly empty)."


class ResumeReady(ResponseModel):
    """Exactly one active checkpoint matches: here it is, whole."""

    status: Literal["ready"]
    checkpoint: Annotated[
        CheckpointRecord,
        Field(description="The full record, as GET /v1/checkpoints/{checkpoint_id} answers it (lease included)."),
    ]
    pending_operations: Annotated[
        list[dict[str, Any]] | SkipJsonSchema[None],
        Field(
            description=(
                "The document's operations whose status is not done, completed, cancelled or failed, as they stand "
                "in the state." + _LIFTED_ONLY
            )
        ),
    ] = None
    stop_conditions: Annotated[
        list[dict[str, Any]] | SkipJsonSchema[None],
        Field(description="The document's continuation.stop_conditions, as they stand in the state." + _LIFTED_ONLY),
    ] = None


class ResumeAmbiguous(ResponseModel):
    """Several checkpoints match (active ones, or only terminal ones): the caller chooses, by `kind`, `agent_id` or
    `checkpoint_id`. Baton never picks one by recency."""

    status: Literal["ambiguous"]
    candidates: Annotated[
        list[CheckpointSummary],
        Field(
            max_length=limits.MAX_RESUME_CANDIDATES,
            description=(
                f"Summaries, newest updated_at first, at most {limits.MAX_RESUME_CANDIDATES}, and only as many as "
                f"fit {limits.MAX_ANSWER_DATA_BYTES:,} bytes of answer (a summary may list 100 resources)."
            ),
        ),
    ]
    candidate_count: Annotated[int, Field(ge=2, description="How many checkpoints matched.")]

    @classmethod
    def of(cls, decision: Decision, now_ms: int) -> ResumeAmbiguous:
        """The candidates of an ambiguous decision (each with its lease when one is live at `now_ms`), as many as
        fit `limits.MAX_ANSWER_DATA_BYTES` of compact UTF-8 JSON (the first always does): fifty summaries of a
        hundred resources each would pass Lambda's answer."""
        room = limits.MAX_ANSWER_DATA_BYTES - AMBIGUOUS_ENVELOPE_BYTES
        candidates: list[CheckpointSummary] = []
        for cp in decision.candidates:
            summary = CheckpointSummary.of(cp, now_ms)
            size = len(model_json(summary).encode("utf-8")) + 1  # and its comma
            if candidates and size > room:
                break
            room -= size
            candidates.append(summary)
        return cls.model_construct(status="ambiguous", candidates=candidates, candidate_count=decision.candidate_count)


AMBIGUOUS_ENVELOPE_BYTES = 100
"""What an `ambiguous` data holds besides its candidates: `{"status":"ambiguous","candidates":[],"candidate_count":N}`
(about 60 bytes)."""


class ResumeNone(ResponseModel):
    """No live checkpoint matches."""

    status: Literal["none"]


class ResumeClosed(ResponseModel):
    """No active checkpoint matches, and exactly one terminal one (completed or cancelled) does."""

    status: Literal["closed"]
    checkpoint: CheckpointSummary

    @classmethod
    def of(cls, cp: Checkpoint, now_ms: int) -> ResumeClosed:
        """The summary of the one terminal match."""
        return cls.model_construct(status="closed", checkpoint=CheckpointSummary.of(cp, now_ms))


class ResumeOmitted(ResponseModel):
    """The `ready` answer would exceed `budget_bytes`: its size and the checkpoint's summary, never a part of it."""

    status: Literal["omitted"]
    required_bytes: Annotated[
        int,
        Field(ge=1, description="The length in bytes of the compact UTF-8 JSON `data` that `ready` would answer."),
    ]
    checkpoint: CheckpointSummary

    @classmethod
    def of(cls, cp: Checkpoint, required_bytes: int, now_ms: int) -> ResumeOmitted:
        """What answers instead of a `ready` of `required_bytes`."""
        return cls.model_construct(
            status="omitted", required_bytes=required_bytes, checkpoint=CheckpointSummary.of(cp, now_ms)
        )


ResumeResult = Annotated[
    ResumeReady | ResumeAmbiguous | ResumeNone | ResumeClosed | ResumeOmitted, Field(discriminator="status")
]
"""What a resume answers, told apart by `status`."""


class ResumeEnvelope(DataEnvelope[ResumeResult]):
    """What `POST /v1/resume` answers: `{data, meta}`, `data.status` saying which answer `data` is."""


def ready_json(summary: CheckpointSummary, state_text: bytes, lifted: Lifted | None) -> str:
    """The `data` of a `ready` answer as compact JSON, in `ResumeReady`'s field order: the record (`summary` with the
    state spliced in) and, for an OpenCheckpoint document, the lifted lists."""
    parts = ['{"status":"ready","checkpoint":', record_json(summary, state_text)]
    if lifted is not None:
        parts += [
            ',"pending_operations":',
            lifted.pending_operations.decode("utf-8"),
            ',"stop_conditions":',
            lifted.stop_conditions.decode("utf-8"),
        ]
    parts.append("}")
    return "".join(parts)
