"""The simulated model's sampled answer: picks "at random", drawn with the request's seed.

The toy model's answers are deterministic, as a real model's are where its distribution is
peaked ("Say hello."). Asked to pick something at random, its distribution is wide: it draws
:data:`PICKS` words with the request's seed and the sampling values in effect, so that a value
the server applies differently (a generation default left out, say) changes the answer, as it
would change a real model's sample of a sentence (two settings give the same three words about
once in 64,000 seeds). At temperature 0 it picks greedily.
"""

from __future__ import annotations

import random
import re
from collections.abc import Mapping
from typing import Any

# What the engine samples with when neither the client nor the model's generation config
# gives a value (vLLM's and the OpenAI API's defaults: temperature 1, top_p 1, no top_k).
ENGINE_DEFAULTS: Mapping[str, float] = {"temperature": 1.0, "top_p": 1.0, "top_k": -1, "min_p": 0.0}
# The candidates of a pick, most likely first (top_k keeps the first k).
WORDS = (
    "otter badger heron lynx walrus gecko bison marten ibis tapir okapi quokka narwhal "
    "ferret puffin koala lemur mole newt ocelot panda raven shrew stoat toad viper wombat "
    "yak zebra alpaca beaver camel dingo eland finch gibbon hyena jackal kiwi llama"
).split()
_AT_RANDOM = re.compile(r"\bat random\b", re.IGNORECASE)
# Words drawn per answer.
PICKS = 3


def effective(request: Mapping[str, Any], defaults: Mapping[str, float]) -> dict[str, float]:
    """The sampling values in effect: the request's, else the model's, else the engine's."""
    return {
        name: request[name] if request.get(name) is not None else defaults.get(name, engine)
        for name, engine in ENGINE_DEFAULTS.items()
    }


def pick(asked: str, request: Mapping[str, Any], defaults: Mapping[str, float]) -> str | None:
    """The words the model picks when `asked` (the last user text) wants them at random.

    :data:`PICKS` of them, joined with commas; None when `asked` wants nothing at random.
    """
    if not _AT_RANDOM.search(asked):
        return None
    values = effective(request, defaults)
    if not values["temperature"]:
        return ", ".join([WORDS[0]] * PICKS)
    top_k = int(values["top_k"])
    pool = WORDS[:top_k] if top_k > 0 else WORDS
    draw = random.Random("|".join(map(str, (request.get("seed"), *values.values()))))
    return ", ".join(draw.choices(pool, k=PICKS))
