"""Scale words computed from the wrong amax (no abs, min, the floor as a ceiling, the wrong range), found by
recomputing s = max(amax', 1e-4) / DIV (ue8m0: rounded up) from k: one hypothesis must explain nearly all the
open words, so a ue8m0 word equal by chance (a few powers of two cover a whole cache) never makes a cause."""

from __future__ import annotations

import torch

from ..core.spec import SCALE_FLOOR
from .frame import Frame

MIN_WORDS = 4
SHARE = 0.9  # share of the open differing words one hypothesis must explain
ULP_LIMIT = 16  # fp32 scales this close to the recomputed one match (x * (1/DIV) against x / DIV)


def group_amax(frame: Frame, units: torch.Tensor) -> torch.Tensor:
    return frame.x(units).abs().amax(dim=1)


def hypotheses(frame: Frame, units: torch.Tensor) -> dict[str, torch.Tensor]:
    """The amax' of each hypothesis for each unit (fp32), before the floor; the right one, max(|x|), last."""
    x = frame.x(units)
    amax = x.abs().amax(dim=1)
    half = x.shape[1] // 2
    found = {"max(x)": x.amax(dim=1), "min(x)": x.amin(dim=1), "min(|x|)": x.abs().amin(dim=1),
             "min(amax, floor)": torch.clamp(amax, max=SCALE_FLOOR)}
    if frame.spec.groups_per_token > 1:
        rows = frame.k.view(-1, frame.spec.head_dim)[frame.source[units].clamp(min=0)]
        found["token"] = rows.float().abs().amax(dim=1)
    if half:
        found["first half"] = x[:, :half].abs().amax(dim=1)
        found["second half"] = x[:, half:].abs().amax(dim=1)
    return found | {"max(|x|)": amax}


def pow2_ceil(x: torch.Tensor) -> torch.Tensor:
    """2 ** ceil(log2(x)) of positive float64 x."""
    mantissa, exponent = torch.frexp(x)  # mantissa in [0.5, 1): x is a power of two where it is 0.5
    return torch.ldexp(torch.ones_like(x), exponent - (mantissa == 0.5).to(exponent.dtype))


def scale_of(amax: torch.Tensor, divisor: float, floor: bool, rounded: bool) -> torch.Tensor:
    s = (torch.clamp(amax, min=SCALE_FLOOR) if floor else amax) / torch.tensor(divisor, dtype=torch.float32)
    return pow2_ceil(s.double()).float() if rounded else s


def wrong_amax(frame: Frame, units: torch.Tensor, open_w: torch.Tensor) -> tuple[torch.Tensor, dict]:
    """(bool [n]: the open words one amax hypothesis explains, its findings {amax, divisor}); none where no
    hypothesis explains SHARE of the open words."""
    none = torch.zeros_like(open_w)
    if (count := int(open_w.sum())) < MIN_WORDS:
        return none, {}
    cand = frame.cand_w[units]
    divisors = sorted({frame.spec.fp8.max, frame.spec.fp8.vllm_divisor}, reverse=True)
    pow2 = frame.spec.scale_fmt.power_of_two
    tried = hypotheses(frame, units)
    tries = []  # (findings, the scale they predict); the right amax only with the other rounding
    for name, amax in tried.items():
        for rounded in (pow2, not pow2) if name != "max(|x|)" else (not pow2,):
            other = {"rounding": "ceil" if rounded else "none"} if rounded != pow2 else {}
            tries += [({"amax": name, "divisor": divisor, **other},
                       scale_of(amax, divisor, name != "min(amax, floor)", rounded)) for divisor in divisors]
    # the right amax with the divisor multiplying (s = amax * DIV): the scale formula's operator swapped
    tries += [({"amax": "max(|x|) * DIV", "divisor": divisor}, scale_of(tried["max(|x|)"], 1 / divisor, True, pow2))
              for divisor in divisors]
    near = ULP_LIMIT * torch.finfo(torch.float32).eps
    matches = ((open_w & ((cand - wanted).abs() <= near * wanted.abs()), found) for found, wanted in tries)
    best, best_found = max(matches, key=lambda match: int(match[0].sum()))  # the first try that explains most
    if int(best.sum()) >= max(MIN_WORDS, SHARE * count):
        return best, best_found
    return none, {}


def implied_divisor(frame: Frame, units: torch.Tensor) -> tuple[float, float] | None:
    """The DIV range consistent with every unit's written scale and its max(|x|): fp32 scales pin it (the
    median of amax / s, as an interval of the spread), ue8m0 scales bound it (2^ceil(log2(a / DIV)) = s holds
    for DIV in [a / s, 2 a / s)); None where the units disagree."""
    implied = torch.clamp(group_amax(frame, units), min=SCALE_FLOOR).double() / frame.cand_w[units].double()
    if frame.spec.scale_fmt.power_of_two:
        low, high = float(implied.max()), float(2 * implied.min())
        return (low, high) if low < high else None
    return float(implied.min()), float(implied.max())
