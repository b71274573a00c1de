"""What every command reports: decided results behind one protocol (renderers ask a result, never switch
on its kind), and the outcomes of a run's cases: one for a command, many for a gate."""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass
from typing import Protocol

from .errors import ExitCode, plural


def json_safe(value):
    """NaN and inf are not JSON: written as strings ("nan", "inf", "-inf"); containers converted throughout."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {key: json_safe(v) for key, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return value


class Checked(Protocol):
    """A decided result. `kind` names the command that made it (compare, table, parity, doctor, record)."""

    kind: str

    @property
    def passed(self) -> bool: ...

    def verdict_line(self) -> str: ...  # the one line: what was decided and every reason it failed

    def top_cause(self) -> str | None: ...  # the main reason it failed, in one line (None when it passed)

    def detail(self) -> str: ...  # plain text for a failure's body: first mismatch, causes, hints, notes

    def to_json(self) -> dict: ...  # JSON-ready data without run-dependent values (timings go to run_json)

    def run_json(self) -> dict: ...  # run-dependent values: timings

    def views(self) -> tuple: ...  # tables, maps and plots (views.py) for the HTML report; () where the text says all


@dataclass(frozen=True)
class Differs:
    """A result declared to differ (a gate case's `expect = "different"`, an [[expect]] row): it passes
    while the difference shows and fails once the result passes, so CI notices when it is fixed."""

    result: Checked
    reason: str | None

    @property
    def kind(self) -> str:
        return self.result.kind

    @property
    def passed(self) -> bool:
        return not self.result.passed

    def _why(self) -> str:
        return f" ({self.reason})" if self.reason else ""

    def verdict_line(self) -> str:
        if self.passed:
            return f"PASS: differs, as expected{self._why()}: {self.result.verdict_line()}"
        return f"FAIL: expected to differ{self._why()}, but: {self.result.verdict_line()}"

    def top_cause(self) -> str | None:
        return None if self.passed else f"expected to differ{self._why()}, but it passes"

    def detail(self) -> str:
        return self.result.detail()

    def to_json(self) -> dict:
        return {**self.result.to_json(), "expect": "different", "expect_reason": self.reason}

    def run_json(self) -> dict:
        return self.result.run_json()

    def views(self) -> tuple:
        return self.result.views()


class Status(enum.Enum):
    PASSED = "passed"
    FAILED = "failed"  # exit 1: a verdict failed
    ERROR = "error"  # exit 2 or 3: the case could not be decided
    SKIPPED = "skipped"  # this machine cannot run the case (errors.NotRunnableHere); an error under --strict


@dataclass(frozen=True)
class Outcome:
    """One case: a decided result, or the error line that kept it from being decided."""

    case_id: str
    kind: str
    exit_code: ExitCode
    result: Checked | None  # None when the case erred
    error: str | None
    seconds: float
    skipped: bool = False  # `error` says why this machine cannot run it
    reason: str | None = None  # why the case is expected to differ (a gate's [[expect]] row), if it is
    axes: tuple[tuple[str, str], ...] = ()  # a gate case's parameters (key, value): where it sits in the matrix

    @classmethod
    def decided(cls, case_id: str, result: Checked, seconds: float, reason: str | None = None) -> "Outcome":
        return cls(case_id, result.kind, ExitCode.OK if result.passed else ExitCode.DIFFER, result, None, seconds,
                   reason=reason)

    @property
    def status(self) -> Status:
        if self.skipped:
            return Status.SKIPPED
        if self.exit_code == ExitCode.OK:
            return Status.PASSED
        return Status.FAILED if self.exit_code == ExitCode.DIFFER else Status.ERROR

    def verdict_line(self) -> str:
        if self.result is None:
            return f"{'SKIPPED' if self.skipped else 'ERROR'}: {self.error}"
        return self.result.verdict_line()

    def top_cause(self) -> str | None:
        return None if self.result is None or self.result.passed else self.result.top_cause()

    def detail(self) -> str:
        return self.error or "" if self.result is None else self.result.detail()


@dataclass(frozen=True)
class Outcomes:
    """The cases of one run: `title` names it (`compare`, `gate configs/ci.toml`); `batch` is True for a
    gate (its JSON lists cases) and False for a single command (its JSON is the result's own)."""

    title: str
    outcomes: tuple[Outcome, ...]
    selected: int  # cases selected to run; fewer ran when fail_fast stopped early
    seconds: float
    batch: bool = True

    @property
    def nothing_ran(self) -> bool:
        """A gate none of whose cases ran (every one skipped, or none selected): it never passes."""
        return self.batch and self.count(Status.SKIPPED) == len(self.outcomes)

    @property
    def exit_code(self) -> ExitCode:
        worst = max((o.exit_code for o in self.outcomes), default=ExitCode.OK)
        return ExitCode.USAGE if worst == ExitCode.OK and self.nothing_ran else worst

    def count(self, status: Status) -> int:
        return sum(1 for o in self.outcomes if o.status is status)

    def tally(self) -> str:
        """`40 passed, 0 failed, 0 errors of 40 cases in 12.3 s` (and `, N skipped` after the errors), and why
        fewer ran (--fail-fast) or none did."""
        passed, failed, errors, skipped = map(self.count, Status)
        more = f", {skipped} skipped" if skipped else ""
        stopped = f" (stopped after {len(self.outcomes)}: --fail-fast)" if len(self.outcomes) < self.selected else ""
        none = " (no case ran: a gate that runs nothing never passes)" if self.nothing_ran else ""
        return (f"{passed} passed, {failed} failed, {plural(errors, 'error')}{more} of {plural(self.selected, 'case')}"
                f" in {self.seconds:.1f} s{stopped}{none}")

    def verdict_line(self) -> str:
        """A single command's own verdict; a gate's `PASS: 40 passed, 0 failed, 0 errors of 40 cases in 12.3 s`."""
        if not self.batch and len(self.outcomes) == 1:
            return self.outcomes[0].verdict_line()
        return f"{'PASS' if self.exit_code == ExitCode.OK else 'FAIL'}: {self.tally()}"


def single(case_id: str, result: Checked, seconds: float) -> Outcomes:
    return Outcomes(result.kind, (Outcome.decided(case_id, result, seconds),), 1, seconds, batch=False)
