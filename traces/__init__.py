"""Real workload logs shipped with gangsched, so that `gang sim` and experiment S6 run out of
the box (see README.md in this folder for their source and licence)."""

from pathlib import Path

FOLDER = Path(__file__).resolve().parent
KTH_SP2 = FOLDER / "KTH-SP2-1996-2.1-cln.swf.gz"
LANL_CM5_SAMPLE = FOLDER / "LANL-CM5-1994-4.1-cln-first100.swf.gz"  # with memory fields: experiment S7
LANL_CM5_NODE_KB = 32 * 1024  # a CM-5 node's memory, which its requests (field 10) are per processor of


def shipped() -> list[Path]:
    return sorted(FOLDER.glob("*.swf.gz"))


def find(name: str) -> Path | None:
    """The shipped log called ``name`` (its file name, with or without ``.swf.gz``), if any."""
    return next((path for path in shipped() if name in (path.name, path.name.removesuffix(".swf.gz"))), None)
