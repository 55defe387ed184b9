"""cdk-nag: the AwsSolutions checks run in every synthesis, find nothing unacknowledged, and each acknowledgement
carries its reason in the code."""

from __future__ import annotations

import ast
import json
from pathlib import Path
from typing import Any

import infra
import pytest
from aws_cdk import aws_s3 as s3

from tests.infrastructure.conftest import Synthesized, synthesize_app

INFRA = Path(infra.__file__).resolve().parent
NAG_MODULE = INFRA / "nag.py"
ACKNOWLEDGED = "aws:cdk:acknowledged-rules"


def _report(outdir: Path) -> dict[str, Any]:
    report = json.loads((outdir / "validation-report.json").read_text(encoding="utf-8"))
    assert isinstance(report, dict)
    return report


def _violations(report: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(plugin, rule, construct path) of every violation in a validation report."""
    return [
        (plugin["pluginName"], violation["ruleName"], construct["constructPath"])
        for plugin in report["pluginReports"]
        for violation in plugin.get("violations", [])
        for construct in violation["violatingConstructs"]
    ]


def _acknowledgements(synthesized: Synthesized) -> dict[tuple[str, str], str]:
    """(construct path, acknowledged id) -> reason, read from the construct metadata of the synthesized app."""
    found: dict[tuple[str, str], str] = {}
    for construct in synthesized.app.node.find_all():
        for entry in construct.node.metadata:
            if entry.type == ACKNOWLEDGED:
                for rule, reason in dict(entry.data).items():
                    found[(construct.node.path, rule)] = reason
    return found


def _calls(tree: ast.AST, name: str) -> list[ast.Call]:
    """Calls of a function or method called `name`."""
    return [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and (
            (isinstance(node.func, ast.Name) and node.func.id == name)
            or (isinstance(node.func, ast.Attribute) and node.func.attr == name)
        )
    ]


def _argument(call: ast.Call, position: int, keyword: str) -> ast.expr | None:
    if len(call.args) > position:
        return call.args[position]
    return next((k.value for k in call.keywords if k.arg == keyword), None)


def test_every_synthesis_has_no_unacknowledged_finding(synthesized: Synthesized) -> None:
    # Given a fixture's synthesis, which succeeded (a finding makes app.synth() raise)
    report = _report(synthesized.outdir)
    # Then its validation report lists no violation and no failed plugin
    assert _violations(report) == []
    assert all(plugin.get("conclusion") != "failure" for plugin in report["pluginReports"])


def test_aws_solutions_checks_are_wired_into_build_app(tmp_path: Path) -> None:
    # Given the app build_app makes, and a bucket in its stack that neither enforces TLS nor logs access
    app, stack = synthesize_app(tmp_path, {"stage": "dev"})
    s3.Bucket(stack, "NonCompliant")
    # When the app is synthesized
    with pytest.raises(RuntimeError, match="ValidationFailed") as raised:
        app.synth()
    # Then synthesis fails, pointing at its report, and the findings are cdk-nag's AwsSolutions pack's
    assert "validation-report.json" in str(raised.value)
    report = _report(tmp_path)
    assert "AwsSolutions" in str(raised.value) + json.dumps(report)
    violations = _violations(report)
    assert ("AwsSolutions", "AwsSolutions-S10", f"{stack.node.path}/NonCompliant/Resource") in violations
    assert ("AwsSolutions", "AwsSolutions-S1", f"{stack.node.path}/NonCompliant/Resource") in violations
    # And only the planted bucket is reported: the stack's own resources pass the same checks
    assert {path for _, _, path in violations} == {f"{stack.node.path}/NonCompliant/Resource"}


def test_every_acknowledgement_in_the_app_carries_a_reason(synthesized: Synthesized) -> None:
    # Given the acknowledgements recorded on the constructs of a synthesized app
    acknowledgements = _acknowledgements(synthesized)
    assert acknowledgements, "the app acknowledges nothing: then this test proves nothing"
    for (path, rule), reason in acknowledgements.items():
        # Then each names an AwsSolutions rule, and says in a sentence why the finding is acceptable
        assert "AwsSolutions-" in rule, (path, rule)
        assert isinstance(reason, str), (path, rule)
        assert len(reason.split()) >= 5, (path, rule, reason)


def test_iam5_acknowledgements_name_the_exact_finding(synthesized: Synthesized) -> None:
    # Given the acknowledgements of wildcard permissions (AwsSolutions-IAM5)
    rules = [rule for _, rule in _acknowledgements(synthesized) if "AwsSolutions-IAM5" in rule]
    # Then each names one finding (`IAM5[Resource::...]`), never the whole rule for the whole construct
    for rule in rules:
        assert "AwsSolutions-IAM5[" in rule, rule


def test_every_acknowledge_call_in_infra_gives_a_literal_reason() -> None:
    # Given the source of every module of infra/
    calls = 0
    for path in sorted(INFRA.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        # When the calls of acknowledge(scope, finding, reason) are read (nag.py's own passes its argument on)
        for call in _calls(tree, "acknowledge"):
            if path == NAG_MODULE and isinstance(call.func, ast.Attribute):
                continue
            assert isinstance(call.func, ast.Name), f"{path.name}:{call.lineno}: acknowledge through infra.nag only"
            calls += 1
            finding = _argument(call, 1, "finding")
            reason = _argument(call, 2, "reason")
            where = f"{path.name}:{call.lineno}"
            # Then the finding is an AwsSolutions rule and the reason a non-empty sentence written in the code
            assert isinstance(finding, ast.Constant | ast.JoinedStr), where
            first = finding.value if isinstance(finding, ast.Constant) else finding.values[0]
            text = first.value if isinstance(first, ast.Constant) else first
            assert isinstance(text, str), where
            assert text.startswith("AwsSolutions-"), where
            assert isinstance(reason, ast.Constant), f"{where}: the reason must be a string literal"
            assert isinstance(reason.value, str), where
            assert len(reason.value.split()) >= 5, f"{where}: {reason.value!r} is no reason"
    assert calls > 0


def test_acknowledgements_are_made_in_one_place_only() -> None:
    # Given the source of every module of infra/
    for path in sorted(INFRA.rglob("*.py")):
        source = path.read_text(encoding="utf-8")
        tree = ast.parse(source, filename=str(path))
        # Then only infra/nag.py builds acknowledgements, and nothing suppresses findings another way
        if path != NAG_MODULE:
            assert not _calls(tree, "Acknowledgment"), path.name
            assert not _calls(tree, "acknowledge_warning"), path.name
            assert not _calls(tree, "acknowledge_info"), path.name
        assert "NagSuppressions" not in source, path.name
        assert "add_suppressions" not in source, path.name
