"""The repository stands alone: its docs cover the protocol, its links resolve, and nothing
cites a document that is not in it."""

import re
import tomllib
import typing
from pathlib import Path

from gangsched.protocol.messages import Message

ROOT = Path(__file__).resolve().parents[1]
DOCS = sorted((ROOT / "docs").glob("*.md")) + [ROOT / "README.md", ROOT / "traces" / "README.md"]


_NOT_THE_PROJECT = {"build", "__pycache__", "node_modules"}  # what an install or a run leaves beside it
_HIDDEN_OF_THE_PROJECT = {".ci", ".github"}


def project_files() -> list[Path]:
    """The repository's files as a clone has them: no hidden folder but its own (.git, .venv), nothing built or
    compressed."""
    return [path for path in ROOT.rglob("*") if path.is_file() and path.suffix != ".gz"
            and not any((part.startswith(".") and part not in _HIDDEN_OF_THE_PROJECT) or part in _NOT_THE_PROJECT
                        or part.endswith(".egg-info") for part in path.relative_to(ROOT).parts[:-1])]


def test_nothing_cites_a_document_outside_the_repository():
    # the names of documents outside the repository, spelt so that this line does not match them
    outside = re.compile(r"seed[s]? ?0{0,2}[0-4]\b|SPEC ?§|SPEC\.md|" + "MEASURE" + "MENTS", re.IGNORECASE)
    found = [f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
             for path in project_files()
             for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1)
             if outside.search(line)]
    assert not found, "\n".join(found)


def test_every_message_type_is_in_the_protocol_doc():
    union = typing.get_args(Message)[0] if typing.get_origin(Message) is typing.Annotated else Message
    types = [model.model_fields["type"].default for model in typing.get_args(union)]
    text = (ROOT / "docs" / "protocol.md").read_text()
    missing = [name for name in types if f"`{name}`" not in text]
    assert len(types) > 20 and not missing


def _anchors(path: Path) -> set[str]:
    text = path.read_text()
    headings = {re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
                for heading in re.findall(r"^#+ (.+)$", text, re.MULTILINE)}
    return headings | set(re.findall(r'<a id="([^"]+)">', text))


def test_every_link_between_the_docs_resolves():
    broken = []
    for path in DOCS:
        for target in re.findall(r"\]\(([^)\s]+)\)", path.read_text()):
            if re.match(r"[a-z]+:", target):
                continue  # a web address
            file, _, anchor = target.partition("#")
            linked = (path.parent / file).resolve() if file else path
            if not linked.exists() or (anchor and anchor not in _anchors(linked)):
                broken.append(f"{path.relative_to(ROOT)} -> {target}")
    assert not broken, broken


def test_the_configuration_doc_is_made_from_the_settings_models():
    from gangsched.cli.options import configuration_doc

    assert (ROOT / "docs" / "configuration.md").read_text() == configuration_doc(), (
        "docs/configuration.md is out of date: regenerate it as its first lines say")


def test_the_architecture_table_names_every_module_of_every_package():
    """A module added under a package folder and left out of docs/architecture.md's table fails here."""
    text = (ROOT / "docs" / "architecture.md").read_text()
    table = text[text.index("## Where the code is"):]
    rows = dict(re.findall(r"^\| `([a-z_]+)/` \| (.*) \|$", table, re.MULTILINE))
    folders = typing.cast(dict[str, str], tomllib.loads((ROOT / "pyproject.toml").read_text())
                          ["tool"]["setuptools"]["package-dir"])
    missing = []
    for folder in folders.values():
        assert folder in rows, f"no row for {folder}/"
        named = set(re.findall(r"`([a-z_0-9]+)`", rows[folder]))
        missing += [f"{folder}/{path.name}" for path in sorted((ROOT / folder).glob("*.py"))
                    if not path.stem.startswith("__") and path.stem not in named]
    assert not missing, "not in docs/architecture.md's table: " + ", ".join(missing)
