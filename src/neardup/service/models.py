"""Request and response bodies of the HTTP service, as pydantic models.

Requests use the field names of the JSONL input (``id``, ``text``, optional ``title`` and the
``tags`` / ``keywords`` / ``refs`` metadata); a batch is ``{"documents": [...]}`` beside the
request's options. Types are strict (an id is a string or an integer, never a boolean or a
float), so a client's mistake is named, not coerced. Responses are built as plain dicts for
speed; their models here document them in the OpenAPI page.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictBool,
    StrictInt,
    StrictStr,
    model_validator,
)


def _id_value(value: Any) -> Any:
    """Name the id's type the way JSONL input errors do, instead of pydantic's per-member
    union messages ("should be a valid string", "should be a valid integer")."""
    if value is None or isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool)):
        return value
    kind = "a boolean" if isinstance(value, bool) else f"{type(value).__name__} {value!r}"
    raise ValueError(f"an id must be a string or an integer, not {kind}")


DocumentId = Annotated[StrictStr | StrictInt, BeforeValidator(_id_value)]
Metadata = list[StrictStr] | StrictStr | None


class _Body(BaseModel):
    """Options and batch wrappers refuse unknown fields, so a misspelt option is an error."""

    model_config = ConfigDict(extra="forbid")


class Document(BaseModel):
    """A document to store. Other fields are accepted and ignored, as in JSONL input."""

    model_config = ConfigDict(extra="allow")

    id: DocumentId
    text: StrictStr
    title: StrictStr | None = None
    tags: Metadata = None
    keywords: Metadata = None
    refs: Metadata = None


class TextDocument(BaseModel):
    """A text to fingerprint; the id, if any, is echoed back."""

    model_config = ConfigDict(extra="allow")

    id: DocumentId | None = None
    text: StrictStr
    title: StrictStr | None = None


class QueryDocument(BaseModel):
    """A query: a text (fingerprinted, and verified if the index verifies) or a fingerprint
    in hex (Simhash matches only: no text, no signature to verify with)."""

    model_config = ConfigDict(extra="allow")

    id: DocumentId | None = None
    text: StrictStr | None = None
    fingerprint: StrictStr | None = Field(default=None, examples=["9f3a0c5e12b47d80"])
    title: StrictStr | None = None
    tags: Metadata = None
    keywords: Metadata = None
    refs: Metadata = None

    @model_validator(mode="after")
    def _text_or_fingerprint(self) -> QueryDocument:
        if (self.text is None) == (self.fingerprint is None):
            raise ValueError('give exactly one of "text" and "fingerprint"')
        return self


_MAX_MATCHES = "Matches listed per document, the nearest first: at most the service's --max-matches."


class QueryOptions(_Body):
    max_distance: StrictInt | None = Field(default=None, ge=0, description="At most the index's distance.")
    explain: StrictBool = Field(default=False, description="Add to each match why it matched.")
    max_matches: StrictInt | None = Field(default=None, ge=1, description=_MAX_MATCHES)


class SingleQuery(QueryDocument):
    max_distance: StrictInt | None = Field(default=None, ge=0)
    explain: StrictBool = False
    max_matches: StrictInt | None = Field(default=None, ge=1, description=_MAX_MATCHES)


class QueryBatch(QueryOptions):
    documents: list[QueryDocument]


class CheckDocument(Document):
    """A document to check-and-add, with the request's option (one document is its own request)."""

    max_matches: StrictInt | None = Field(default=None, ge=1, description=_MAX_MATCHES)


class DocumentBatch(_Body):
    documents: list[Document]


class CheckBatch(DocumentBatch):
    max_matches: StrictInt | None = Field(default=None, ge=1, description=_MAX_MATCHES)


class AddBatch(DocumentBatch):
    existing: Literal["fail", "skip", "replace"] = Field(
        default="fail",
        description="A stored id fails the whole batch (409); or is skipped when its text is the "
        "stored one (a retried request) and fails the batch (409) when it is another; or, with "
        "replace, its stored record takes the new text.",
    )


class TextBatch(_Body):
    documents: list[TextDocument]


# -- responses (documentation) -----------------------------------------------------------------


class FingerprintOut(BaseModel):
    id: DocumentId | None
    fingerprint: str = Field(description="bits/4 hex digits; bit i is bit i of the integer.")


class MatchOut(BaseModel):
    id: DocumentId
    distance: int
    fingerprint: str
    explanation: dict[str, Any] | None = Field(
        default=None,
        description="With explain: differing_bits, similarity (1 - distance/bits), tables (whose "
        "block keys agree) and, for a verifying index, signature_jaccard and score.",
    )


_TRUNCATED = "Present, and true, only when max_matches left farther matches out."


class QueryOut(BaseModel):
    id: DocumentId | None
    duplicate: bool
    verified: bool = Field(description="Whether the matches were confirmed by MinHash signatures.")
    matches: list[MatchOut]
    matches_truncated: bool | None = Field(default=None, description=_TRUNCATED)


class CheckOut(BaseModel):
    id: DocumentId
    cluster: DocumentId = Field(description="The id of the document that started the cluster; stable.")
    duplicate: bool
    added: bool = Field(description="False when the id was stored already (a retry gets its first answer).")
    matches: list[MatchOut]
    matches_truncated: bool | None = Field(default=None, description=_TRUNCATED)


class AddOut(BaseModel):
    added: int
    skipped: int
    ids: list[DocumentId] = Field(description="The ids this request stored.")


class Results(BaseModel):
    results: list[dict[str, Any]]


class ErrorBody(BaseModel):
    status: int
    code: str
    message: str
    details: list[dict[str, Any]] = Field(default_factory=list)


class ErrorOut(BaseModel):
    error: ErrorBody
