"""The package's surface: every public name documented, the type stub valid and complete."""

import ast
import inspect
import pathlib

import qtk


def test_every_public_name_has_a_docstring():
    assert qtk.__doc__ and len(qtk.__doc__) > 200
    missing = []
    for name in qtk.__all__:
        obj = getattr(qtk, name)
        if name in ("__version__", "PRESETS", "MAX_RANK"):
            continue
        if not (obj.__doc__ or "").strip():
            missing.append(name)
        if inspect.isclass(obj) and obj is not qtk.Error:
            for attr, member in vars(obj).items():
                if attr.startswith("_"):
                    continue
                if not (getattr(member, "__doc__", None) or "").strip():
                    missing.append("%s.%s" % (name, attr))
    assert missing == []


def test_the_stub_covers_the_extension():
    stub = pathlib.Path(qtk.__file__).with_name("_qtk.pyi")
    assert pathlib.Path(qtk.__file__).with_name("py.typed").exists()
    tree = ast.parse(stub.read_text())
    declared = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    declared |= {t.id for n in tree.body if isinstance(n, ast.AnnAssign) for t in [n.target]}
    public = {n for n in dir(qtk._qtk) if not n.startswith("_")}
    assert public - declared == set()
    for cls in ("Scheme", "Tensor", "Checkpoint"):
        node = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls)
        members = {n.name for n in node.body if isinstance(n, ast.FunctionDef)}
        real = {n for n in vars(getattr(qtk, cls)) if not n.startswith("_")}
        assert real - members == set(), cls
