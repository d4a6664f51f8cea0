"""The Matrix desk's reading of a caller's fields (text from the page, the Gradio API or MCP): every bad spelling
is a BadInput naming the fix, never another exception (which the doors answer as "unexpected server error")."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from finspace.documents.gate import ConversionGate
from finspace.documents.limits import DocumentLimits
from finspace.errors import BadInput
from finspace.matrix.desk import MatrixDesk


@pytest.fixture
def desk() -> MatrixDesk:
    return MatrixDesk(SimpleNamespace(), ConversionGate(1, 1, 60.0), DocumentLimits(), "/tmp/uploads")


@pytest.mark.parametrize(
    "spec,match",
    [
        ('[{"name": "Revenue"', r"not valid JSON \(Expecting .* at character \d+\)"),
        # json.loads raises a plain ValueError (no .msg) for an integer past Python's 4,300 digits: it was an
        # AttributeError, "unexpected server error (AttributeError)" at the door
        ("[" + "1" * 5000 + "]", r"not valid JSON \(Exceeds the limit .*integer string conversion"),
        ("[" * 100_000 + "]" * 100_000, r"nested too deeply"),
    ],
)
def test_bad_fields_are_refused_naming_the_fix(desk, spec, match):
    with pytest.raises(BadInput, match=match) as err:
        desk.fields(spec)
    assert "preset name" in str(err.value)
