"""JUnit XML: one <testcase> per case; a failed verdict is a <failure> (message: the verdict and top cause;
text: the detail), an undecided case an <error>. Every text is made printable first (errors.printable): XML 1.0
has no escape for most control characters, so a case id carrying one would make the file unreadable."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from ..core.errors import printable
from ..core.outcome import Outcomes, Status


def render(run: Outcomes) -> str:
    counts = {"tests": str(len(run.outcomes)), "failures": str(run.count(Status.FAILED)),
              "errors": str(run.count(Status.ERROR)), "skipped": str(run.count(Status.SKIPPED)),
              "time": f"{run.seconds:.3f}"}
    root = ET.Element("testsuites", {"name": "fp8check", **counts})
    suite_el = ET.SubElement(root, "testsuite", {"name": printable(run.title), **counts})
    for outcome in run.outcomes:
        case_el = ET.SubElement(suite_el, "testcase", {"classname": f"fp8check.{outcome.kind}",
                                                       "name": printable(outcome.case_id),
                                                       "time": f"{outcome.seconds:.3f}"})
        verdict = printable(outcome.verdict_line())
        message = printable(outcome.error) if outcome.error else verdict
        if outcome.status is Status.FAILED:
            cause = outcome.top_cause() and f"; {printable(outcome.top_cause())}"
            kind = {"parity": "ParityVerdict", "doctor": "Requirement"}.get(outcome.kind, "ByteVerdict")  # what failed
            failure = ET.SubElement(case_el, "failure", {"message": verdict + (cause or ""), "type": kind})
            failure.text = printable(outcome.detail(), newlines=True)
        elif outcome.status is Status.SKIPPED:
            ET.SubElement(case_el, "skipped", {"message": message})
        elif outcome.status is Status.ERROR:
            error = ET.SubElement(case_el, "error", {"message": message, "type": "UserError"
                                                     if outcome.exit_code == 2 else "CheckerError"})
            error.text = f"exit code {int(outcome.exit_code)}: {printable(outcome.error, newlines=True)}"
        else:
            ET.SubElement(case_el, "system-out").text = verdict
    ET.indent(root)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
