"""A chat template comes from a model folder the user downloads: it can neither read files nor
run code, and whatever it does wrong is one clean line. The package itself evaluates nothing."""

from __future__ import annotations

import ast
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import REPO, VerifierRun
from tests.test_bad_input import profile_with_template, the_error_line
from verifier.reference.template import ChatTemplate, TemplateError

Run = Callable[..., VerifierRun]
SECRET_TEXT = "TOP-SECRET-7c1e: the contents of a private file"
# What a leak would look like: /etc/passwd's first line, `id` output, our own secret file.
LEAKS = ("root:", "uid=", "TOP-SECRET-7c1e")
HELLO = [{"role": "user", "content": "Hello"}]

ATTACKS = {
    "self-init-globals": ("{{ self.__init__.__globals__ }}", "unsafe"),
    "cycler-popen": ("{{ cycler.__init__.__globals__.os.popen('id').read() }}", "unsafe"),
    "joiner-globals": ("{{ joiner.__init__.__globals__ }}", "unsafe"),
    "namespace-globals": ("{{ namespace.__init__.__globals__ }}", "unsafe"),
    "lipsum-globals": ("{{ lipsum.__globals__ }}", "unsafe"),
    "lipsum-popen": ("{{ lipsum.__globals__['os'].popen('id').read() }}", "unsafe"),
    "helper-globals": ("{{ raise_exception.__globals__ }}", "unsafe"),
    "strftime-globals": ("{{ strftime_now.__globals__['datetime'] }}", "unsafe"),
    "subclasses": ("{{ ''.__class__.__mro__[1].__subclasses__() }}", "unsafe"),
    "format-string": ("{{ '{0.__class__.__mro__}'.format(messages) }}", "unsafe"),
    "attr-filter": ("{{ messages | attr('__class__') }}", "unsafe"),
    "map-attribute": ("{{ messages | map(attribute='__class__') | list }}", "unsafe"),
    "template-context": ("{{ self._TemplateReference__context }}", "unsafe"),
    "include-passwd": ("{% include '/etc/passwd' %}", "no loader"),
    "include-relative": ("{% include 'secret.txt' %}", "no loader"),
    "import-passwd": ("{% import '/etc/passwd' as passwd %}{{ passwd }}", "no loader"),
    "from-import": ("{% from '/etc/passwd' import root %}{{ root }}", "no loader"),
    "extends-passwd": ("{% extends '/etc/passwd' %}", "no loader"),
}


@pytest.fixture
def secret_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private file beside the working directory, where a relative include would look."""
    path = tmp_path / "secret.txt"
    path.write_text(SECRET_TEXT)
    monkeypatch.chdir(tmp_path)
    return path


@pytest.mark.parametrize("name", list(ATTACKS))
def test_a_template_cannot_reach_python_or_files(secret_file: Path, name: str) -> None:
    source, reason = ATTACKS[name]
    with pytest.raises(TemplateError) as raised:
        ChatTemplate(source).render(HELLO)
    message = str(raised.value)
    assert message.startswith("the chat template failed: ") and reason in message, message
    assert "\n" not in message
    assert not any(leak in message for leak in LEAKS)


def test_an_include_of_an_absolute_path_reads_nothing(secret_file: Path) -> None:
    with pytest.raises(TemplateError, match="no loader") as raised:
        ChatTemplate(f"{{% include '{secret_file}' %}}").render(HELLO)
    assert SECRET_TEXT not in str(raised.value)


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("{{ 1 / 0 }}", "the chat template failed: ZeroDivisionError: division by zero"),
        (
            "{% for i in range(10 ** 9) %}{% endfor %}",
            r"the chat template failed: OverflowError: Range too big\. .+",
        ),
        (
            "{% macro again() %}{{ again() }}{% endmacro %}{{ again() }}",
            "the chat template failed: RecursionError: maximum recursion depth exceeded.*",
        ),
        ("{{ cycler | tojson }}", "the chat template failed: TypeError: .+"),
        (
            "{{ " + "(" * 3000 + "1" + ")" * 3000 + " }}",
            "the chat template does not compile: RecursionError: .+",
        ),
        ("{{ raise_exception('two\nlines') }}", "the chat template failed: two lines"),
    ],
    ids=["zero-division", "huge-range", "recursion", "tojson-object", "deep-nesting", "newline"],
)
def test_whatever_a_template_raises_is_one_template_error(source: str, message: str) -> None:
    with pytest.raises(TemplateError) as raised:
        ChatTemplate(source).render(HELLO)
    assert re.fullmatch(message, str(raised.value)), str(raised.value)


def test_the_sandbox_still_lets_a_template_build_lists() -> None:
    # The Kimi K2 template queues tool-call ids with append and pop: that must keep working.
    source = (
        "{% set queue = namespace(ids=[]) %}{% set _ = queue.ids.append('a') %}"
        "{% set _ = queue.ids.append('b') %}{{ queue.ids.pop(0) }}{{ queue.ids }}"
    )
    assert ChatTemplate(source).render(HELLO).text == "a['b']"


@pytest.mark.slow
@pytest.mark.parametrize("name", ["include-passwd", "cycler-popen", "lipsum-globals"])
def test_a_hostile_profile_stops_the_run_with_one_line(
    run_verifier: Run, tmp_path: Path, name: str, refused_port: int
) -> None:
    folder = profile_with_template(tmp_path / "model", ATTACKS[name][0])
    # The port refuses connections: reaching the probe would be a "cannot reach" error instead.
    run = run_verifier(f"http://127.0.0.1:{refused_port}", "--profile", str(folder))
    line = the_error_line(run)
    assert line.startswith(f"ERROR: --profile: {folder / 'chat_template.jinja'}: "), line
    assert ATTACKS[name][1] in line
    assert not any(leak in run.stdout + run.stderr for leak in LEAKS)


# What would let data run as code or reach the shell, and jinja2's unsandboxed environment
# and file loaders (a template must never be compiled by them).
FORBIDDEN_CALLS = frozenset({"eval", "exec", "compile", "__import__", "breakpoint"})
FORBIDDEN_MODULES = frozenset({"pickle", "_pickle", "cPickle", "marshal", "shelve", "dill"})
FORBIDDEN_OS = frozenset({"system", "popen", "execv", "execve", "execl", "spawnl", "spawnv"})
FORBIDDEN_JINJA = frozenset(
    {"Environment", "Template", "FileSystemLoader", "PackageLoader", "ModuleLoader"}
)


def findings(source: str, where: str) -> list[str]:
    """``where:line: what`` for every use of something forbidden in `source`."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        what = None
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            if node.func.id in FORBIDDEN_CALLS:
                what = f"calls {node.func.id}()"
        if isinstance(node, ast.Call) and any(
            k.arg == "shell" and not (isinstance(k.value, ast.Constant) and not k.value.value)
            for k in node.keywords
        ):
            what = "starts a shell"
        if isinstance(node, ast.Import | ast.ImportFrom):
            modules = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom) and node.module:
                modules.append(node.module)
            bad = [m for m in modules if m.split(".")[0] in FORBIDDEN_MODULES]
            if bad:
                what = f"imports {bad[0]}"
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("jinja2"):
                names = [a.name for a in node.names if a.name in FORBIDDEN_JINJA]
                if names:
                    what = f"imports jinja2's {names[0]}"
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            if node.value.id == "os" and node.attr in FORBIDDEN_OS:
                what = f"uses os.{node.attr}"
            if node.value.id == "jinja2" and node.attr in FORBIDDEN_JINJA:
                what = f"uses jinja2.{node.attr}"
        if what:
            found.append((node.lineno, what))
    return [f"{where}:{line}: {what}" for line, what in sorted(found)]


def test_the_scanner_sees_what_it_looks_for() -> None:
    source = (
        "import pickle\nfrom jinja2 import Environment\nimport os, subprocess\neval('1')\n"
        "os.popen('id')\nsubprocess.run('id', shell=True)\njinja2.FileSystemLoader('.')\n"
    )
    assert [f.split(": ", 1)[1] for f in findings(source, "x.py")] == [
        "imports pickle",
        "imports jinja2's Environment",
        "calls eval()",
        "uses os.popen",
        "starts a shell",
        "uses jinja2.FileSystemLoader",
    ]


def test_no_module_of_the_package_evaluates_code_or_unpickles() -> None:
    package = REPO / "verifier"
    found = []
    for path in sorted(package.rglob("*.py")):
        found += findings(path.read_text(encoding="utf-8"), str(path.relative_to(REPO)))
    assert found == []
