"""cfn-lint passes on every synthesized template (only W3005, CDK's redundant DependsOn, is ignored)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from tests.infrastructure.conftest import Synthesized


def _cfn_lint() -> str:
    beside = Path(sys.executable).parent / "cfn-lint"
    if beside.exists():
        return str(beside)
    found = shutil.which("cfn-lint")
    assert found, "cfn-lint is not installed (it is in the `infra` extra)"
    return found


def test_cfn_lint_finds_nothing_in_the_template(synthesized: Synthesized) -> None:
    # Given the template file the synthesis wrote
    assert synthesized.template_path.is_file()
    # When cfn-lint checks it
    result = subprocess.run(
        [_cfn_lint(), "--ignore-checks", "W3005", "--", str(synthesized.template_path)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    # Then it reports nothing: no error, no warning, no informational finding
    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")
