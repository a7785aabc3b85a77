"""What the parity family compares with: the live reference, a recording, or nothing.

Before the run, a ``--baseline`` scorecard's recording is read (and checked by sha256), so
that a bad one stops the run before any request; once the probe has found which logprobs
each side gives, :func:`parity_context` says how the cases compare.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...errors import ConfigError
from ...protocol.logprobs import LogprobsSupport
from ..registry import Contextualise, ParityContext, Probed

if TYPE_CHECKING:
    from ...config import RunConfig

# The recorded answers, written beside the scorecard, which holds their sha256.
RECORDING_FILE = "parity.json"


def before_run(run: RunConfig, baseline: Mapping[str, Any] | None) -> Contextualise:
    """Read the baseline's recording (before any request); the context follows the probe.

    Raises:
        ConfigError: the recording the baseline names is missing or not the one it digests.
    """
    recordings = _recordings(run.baseline, baseline)
    method = run.parity_method
    return lambda probed: {"parity": parity_context(probed, baseline, recordings, method)}


def parity_context(
    probed: Probed,
    baseline: Mapping[str, Any] | None,
    recordings: Mapping[str, Any] | None,
    method: str = "auto",
) -> ParityContext:
    """What the parity family compares with: the live reference, a recording, or nothing.

    Alternatives are asked for as many as both sides list (a recording lists its own). Where
    either side lists none, or `method` (``--parity-method``) says so, first tokens are
    sampled instead, unless `method` is ``logprobs``.
    """
    own = probed.logprobs or LogprobsSupport(None)
    sample = method != "logprobs"
    by_logprobs = method != "sampling"
    why = own.why or "the probe did not ask for logprobs"
    if method == "sampling":
        why = "--parity-method sampling"
    if probed.reference is not None:
        theirs = probed.reference.logprobs
        model = probed.reference.model
        if own.top is None or theirs.top is None or not by_logprobs:
            if by_logprobs:
                why = own.why or f"the reference: {theirs.why}"
            return ParityContext(
                why_unavailable=why, sampling=sample, live=True, reference_model=model
            )
        return ParityContext(
            top_logprobs=min(own.top, theirs.top), live=True, reference_model=model
        )
    if baseline is not None and recordings is None:
        return ParityContext(
            why_unavailable="the --baseline scorecard recorded no parity answers: run the "
            "reference with --families ...,parity"
        )
    if recordings is None:
        # A recording run: logprobs where the endpoint gives them, and samples.
        top = own.top if by_logprobs else None
        return ParityContext(top_logprobs=top, why_unavailable=why, sampling=sample)
    traced = [rec for rec in recordings.values() if "first" in rec]
    if by_logprobs and own.top is not None and traced:
        listed = [len(top) for rec in traced for top in rec["first"]["k"] if top]
        top = min(own.top, max(listed)) if listed else own.top
        return ParityContext(top_logprobs=top, recordings=recordings)
    if by_logprobs and own.top is not None:
        why = "the --baseline recording has no logprobs"
    if sample and any("samples" in rec for rec in recordings.values()):
        return ParityContext(why_unavailable=why, sampling=True, recordings=recordings)
    if sample:
        why += "; and the --baseline recording has no samples"
    return ParityContext(why_unavailable=why)


def _recordings(path: Path | None, baseline: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The baseline's recorded parity answers, when it recorded them."""
    entry = ((baseline or {}).get("families") or {}).get("parity")
    if path is None or entry is None or not (entry.get("metrics") or {}).get("recording"):
        return None
    return load_recording(path, entry)


def load_recording(scorecard: Path, entry: Mapping[str, Any]) -> dict[str, Any]:
    """The recorded answers a --baseline scorecard's parity entry names, checked by sha256.

    Raises:
        ConfigError: the file is missing, unreadable, or not the one the scorecard digests.
    """
    named = (entry.get("metrics") or {}).get("recording") or {}
    path = scorecard.parent / str(named.get("file", RECORDING_FILE))
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ConfigError(
            f"--baseline: the parity recording {str(path)!r} that the scorecard names cannot "
            f"be read: {exc.strerror or exc}; keep it beside scorecard.json"
        ) from None
    digest = hashlib.sha256(data).hexdigest()
    if digest != named.get("sha256"):
        raise ConfigError(
            f"--baseline: {str(path)!r} has sha256 {digest}, not the {named.get('sha256')} the "
            "scorecard records: it is not the recording of that run"
        )
    prompts: dict[str, Any] = json.loads(data)["prompts"]
    return prompts
