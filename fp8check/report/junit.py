"""JUnit XML: one <testcase> per case. A failed verdict is a <failure> whose message is the verdict and
the top cause and whose text is the first mismatch and the hints; a case that could not be decided is an
<error>. Written with the standard library; pure: a gate result in, XML text out."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from ..gate import GateResult, Status
from . import lines


def junit_xml(result: GateResult, *, suite: str) -> str:
    cases = result.outcomes
    counts = {
        "tests": str(len(cases)), "failures": str(result.count(Status.FAILED)),
        "errors": str(result.count(Status.ERROR)), "skipped": str(result.count(Status.SKIPPED)), "time": f"{result.seconds:.3f}",
    }
    root = ET.Element("testsuites", {"name": "fp8check", **counts})
    suite_el = ET.SubElement(root, "testsuite", {"name": suite, **counts})
    for outcome in cases:
        case_el = ET.SubElement(suite_el, "testcase", {
            "classname": f"fp8check.{outcome.kind}", "name": outcome.case_id, "time": f"{outcome.seconds:.3f}",
        })
        verdict = lines.verdict(outcome)
        if outcome.status is Status.FAILED:
            cause = lines.cause(outcome)
            failure = ET.SubElement(case_el, "failure", {
                "message": f"{verdict}; {cause}" if cause else verdict, "type": "ByteVerdict",
            })
            failure.text = lines.detail(outcome)
        elif outcome.status is Status.SKIPPED:
            ET.SubElement(case_el, "skipped", {"message": outcome.error or verdict})
        elif outcome.status is Status.ERROR:
            kind = "UserError" if outcome.exit_code == 2 else "CheckerError"
            error = ET.SubElement(case_el, "error", {"message": outcome.error or verdict, "type": kind})
            error.text = f"exit code {int(outcome.exit_code)}: {outcome.error}"
        else:
            ET.SubElement(case_el, "system-out").text = verdict
    ET.indent(root)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
