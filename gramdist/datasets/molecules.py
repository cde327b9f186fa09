"""Molecules in: RDKit ``Mol`` objects, SMILES strings, SDF / CSV / SMI files → :class:`GraphBatch`.

Needs the ``chem`` extra (``pip install "gramdist[chem]"``, RDKit from PyPI); RDKit is
imported only when molecules are converted, so :func:`is_molecule_input` works without it.

Graphs
------
One molecule is one graph: atoms are nodes, bonds are undirected edges, in RDKit's atom and
bond order. A molecule of several fragments (a salt such as ``[Na+].[Cl-]`` or a drug with its
counter-ion) stays **one** graph with several connected components; a single atom is a graph
with one node and no edges. Stereochemistry and isotopes are ignored.

Node labels: a fixed integer code per atom, the same in every batch
---------------------------------------------------------------------
The code of an atom does not depend on which other molecules are converted with it, so one
molecule gets the same labels (and a kernel the same features) in any batch, in a fit sample
or out of it::

    label = 10_000 · Z  +  1_000 · aromatic  +  10 · (formal_charge + 50)  +  n_H

``Z`` is the atomic number; ``aromatic`` is 1 for an aromatic atom when ``aromaticity`` is on
(else always 0, and the molecule is kekulised); ``formal_charge`` (−50..49) counts only when
``formal_charge`` is on (else it is taken as 0); ``n_H`` (0..9) is the atom's total hydrogen
count when ``hydrogens="count"`` (else 0). So an aromatic CH is ``61501``, a neutral
aliphatic oxygen ``80500``, a chloride anion ``170490``, an explicit hydrogen node ``10500``.
:func:`atom_label` computes it.

Edge labels: the bond order, 1 single, 2 double, 3 triple, 4 aromatic (an order of its own;
with ``aromaticity`` off the molecule is kekulised, so there are none), and ``10 + t`` for any
other RDKit bond type ``t`` (``int(rdkit.Chem.BondType)``: dative, quadruple, ...).
:func:`bond_label` computes it.

Hydrogens: ``"implicit"`` (default) — hydrogens are not nodes (explicit ones in a ``Mol`` or an
SDF are removed first, so a molecule drawn with or without them is the same graph);
``"explicit"`` — every hydrogen becomes a node (RDKit ``AddHs``); ``"count"`` — hydrogens are
not nodes but each atom's hydrogen count is part of its label.

Node attributes (only when asked): ``partial_charges`` — Gasteiger charges (RDKit
``ComputeGasteigerCharges``), one column; with hydrogens that are not nodes, an atom's charge
includes its hydrogens' (united atoms), so a molecule's charges always sum to its formal charge; ``coordinates`` — the x, y, z of the molecule's 3D
conformer (an SDF with 3D coordinates, or a ``Mol`` with a 3D conformer), three columns. Both:
charge first, then x, y, z. A molecule for which either is undefined is an error.

Targets
-------
``target`` names a CSV column or an SDF property (or, for ``Mol`` objects, a property of each
``Mol``), or gives one value per molecule, or ``{descriptor: NAME}``: an RDKit descriptor
(``rdkit.Chem.Descriptors.descList``: ``MolLogP``, ``TPSA``, ``MolWt``, ``qed``…) computed on
each molecule as parsed (before hydrogens are added or removed for the graph), always float64
— the way the ZINC benchmark regresses a computed property. Values that all parse as numbers become ``y``:
int64 when every value is a whole number (class labels), else float64 (a continuous target,
which ``gramdist evaluate`` treats as regression). Values that are not numbers are class
names, coded as their index in the sorted list of distinct names of this input (so those
codes, unlike the atom labels, depend on the input).

Which inputs are molecules (:func:`is_molecule_input`)
------------------------------------------------------
* an RDKit ``Mol``;
* a path (``str`` or ``os.PathLike``) whose name ends in ``.sdf``, ``.csv`` or ``.smi``, each
  optionally gzipped (``.gz``, read on the fly; case-insensitive), existing or not (a missing
  file is then reported as such);
* a ``str`` that is SMILES *by its syntax*: it does not name an existing file or folder,
  has no whitespace, every atom outside brackets is one of SMILES' organic subset
  (B C N O P S F Cl Br I, aromatic b c n o p s, or ``*``), every ring-closure digit is
  closed and parentheses and brackets balance (:func:`looks_like_smiles`). TU dataset
  names fail this test (``MUTAG``: ``M`` is no organic-subset atom; ``NCI1``, ``NCI109``:
  ring bond ``1`` never closed; ``PTC_MR``: ``_``), as do folder paths;
* a list or tuple (or 1-D array, or pandas Series) whose first element is such a SMILES
  ``str`` or a ``Mol``. Every element must then be of the first one's kind.

SMI files hold one molecule per line, the SMILES first and anything after whitespace ignored
(a name); empty lines and lines starting with ``#`` are skipped. CSV files have a header row;
``smiles_column`` names the SMILES column (default ``smiles``). Relative paths are relative to
the working directory.
"""

from __future__ import annotations

import csv
import gzip
import logging
import math
import os
import re
import sys
import zlib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from gramdist.datasets.nx import require_networkx
from gramdist.errors import DatasetError, MissingExtraError
from gramdist.graphs import GraphBatch

__all__ = [
    "MOLECULE_SUFFIXES", "atom_label", "bond_label", "is_molecule_input", "looks_like_smiles",
    "molecules_to_batch", "molecules_to_networkx",
]

#: file name endings read as molecule files
MOLECULE_SUFFIXES = (".sdf", ".sdf.gz", ".csv", ".csv.gz", ".smi", ".smi.gz")
HYDROGENS = ("implicit", "explicit", "count")
CHARGE_RANGE = (-50, 49)
MAX_H_COUNT = 9

# one SMILES token: a bracket atom, a two-letter organic-subset halogen, a one-letter
# organic-subset atom (aliphatic or aromatic), a wildcard, a bond, a branch, a ring closure
_SMILES_TOKEN = re.compile(r"\[[^\[\]]+\]|Br|Cl|[BCNOPSFI]|[bcnops]|\*|[-=#$:/\\.~]|[()]|%\d\d|\d")
_ATOM = re.compile(r"\[|Br|Cl|[BCNOPSFI]|[bcnops]|\*")


# ----------------------------------------------------------------------------- detection
def looks_like_smiles(text: str) -> bool:
    """True if ``text`` is SMILES by its syntax alone (no RDKit needed); see the module docstring.

    The test is syntactic and errs towards False: an unusual but valid SMILES that fails it
    can still be given in a list or a file. It is not a validity check (RDKit does that).
    """
    if not text or any(c.isspace() for c in text):
        return False
    pos, depth, atoms = 0, 0, 0
    open_rings: set[str] = set()
    for m in _SMILES_TOKEN.finditer(text):
        if m.start() != pos:
            return False
        tok = m.group()
        pos = m.end()
        if _ATOM.match(tok):
            atoms += 1
        elif tok == "(":
            depth += 1
        elif tok == ")":
            depth -= 1
            if depth < 0:
                return False
        elif tok[0] == "%" or tok.isdigit():
            if atoms == 0:
                return False
            open_rings ^= {tok}
    return pos == len(text) and atoms > 0 and depth == 0 and not open_rings


def _is_molecule_path(x: Any) -> bool:
    return isinstance(x, (str, os.PathLike)) and os.fspath(x).lower().endswith(MOLECULE_SUFFIXES)


def _is_mol(x: Any) -> bool:
    # a Mol can only exist if RDKit was imported: never import it just to look
    chem = sys.modules.get("rdkit.Chem")
    return chem is not None and isinstance(x, chem.Mol)


def _is_smiles(x: Any) -> bool:
    return isinstance(x, str) and not os.path.exists(x) and looks_like_smiles(x)


def _as_list(X: Any) -> list | None:
    """``X`` as a list if it is a list, tuple, 1-D array or Series; else None."""
    if isinstance(X, (list, tuple)):
        return list(X)
    if isinstance(X, np.ndarray) or (hasattr(X, "tolist") and hasattr(X, "dtype")):
        if getattr(X, "ndim", 1) == 1:
            return list(X.tolist())
    return None


def is_molecule_input(X: Any) -> bool:
    """True if ``X`` is molecules (a ``Mol``, SMILES, a molecule file, or a list of SMILES or
    ``Mol``); the rule is in the module docstring. Does not import RDKit."""
    if _is_mol(X) or _is_molecule_path(X) or _is_smiles(X):
        return True
    items = None if isinstance(X, (str, bytes, os.PathLike)) else _as_list(X)
    return bool(items) and (_is_mol(items[0]) or _is_smiles(items[0]))


# ----------------------------------------------------------------------------- reading
@dataclass
class _Record:
    """One molecule before parsing: where it came from, its SMILES or Mol, its raw target."""

    where: str
    smiles: str | None
    mol: Any
    target: Any = None


def _chem() -> Any:
    try:
        from rdkit import Chem
    except ImportError:
        raise MissingExtraError('molecules need RDKit: pip install "gramdist[chem]"') from None
    return Chem


def _records(X: Any, smiles_column: str, target: Any) -> tuple[list[_Record], str]:
    """The molecules of ``X`` in order, unparsed, and a name for the batch."""
    if _is_molecule_path(X):
        return _file_records(Path(os.fspath(X)).expanduser(), smiles_column, target), _stem(X)
    items = [X] if isinstance(X, str) or _is_mol(X) else _as_list(X)
    if items is None:
        raise DatasetError(f"molecules: cannot read {type(X).__name__} as molecules "
                           "(give SMILES, RDKit Mols, or an .sdf/.csv/.smi file)")
    if not items:
        raise DatasetError("molecules: no molecules given (empty input)")
    first_is_mol = _is_mol(items[0])
    kind = "an RDKit Mol" if first_is_mol else "a SMILES str"
    recs = []
    for i, x in enumerate(items):
        if _is_mol(x) != first_is_mol or not (first_is_mol or isinstance(x, str)):
            raise DatasetError(f"molecules: molecule {i} is {_describe(x)} but molecule 0 is {kind}; "
                               "give one kind of input per call")
        recs.append(_Record(f"molecule {i}", None if first_is_mol else x, x if first_is_mol else None))
    _attach_targets(recs, target, first_is_mol)
    return recs, ("molecules" if first_is_mol else "smiles")


def descriptor_target(target: Any) -> str | None:
    """The RDKit descriptor a ``{descriptor: NAME}`` target names (checked), else None."""
    if not isinstance(target, Mapping):
        return None
    if set(target) != {"descriptor"} or not isinstance(target["descriptor"], str):
        raise DatasetError(f"molecules: a computed target is {{descriptor: NAME}}, got {dict(target)!r}")
    _descriptor_function(target["descriptor"])
    return target["descriptor"]


def _descriptor_function(name: str) -> Any:
    _chem()
    from rdkit.Chem import Descriptors

    functions = dict(Descriptors.descList)
    if name not in functions:
        close = sorted(n for n in functions if n.lower().startswith(name.lower()[:3]))[:6]
        raise DatasetError(f"molecules: no RDKit descriptor {name!r} (e.g. MolLogP, TPSA, MolWt, qed"
                           f"{'; close: ' + ', '.join(close) if close else ''})")
    return functions[name]


def _compute_descriptor(recs: list[_Record], mols: list[Any], name: str) -> None:
    """Each record's target: the descriptor ``name`` of its molecule (finite, or an error)."""
    function = _descriptor_function(name)
    for r, mol in zip(recs, mols):
        try:
            value = float(function(mol))
        except Exception as exc:  # noqa: BLE001 - RDKit raises several kinds
            raise DatasetError(f"{r.where}: descriptor {name} failed ({type(exc).__name__}: {exc})") from None
        if not math.isfinite(value):
            raise DatasetError(f"{r.where}: descriptor {name} is {value} (not finite)")
        r.target = value


def _describe(x: Any) -> str:
    if isinstance(x, str):
        return f"the str {x[:60]!r}"
    return f"a {type(x).__module__}.{type(x).__name__}"


def _stem(path: Any) -> str:
    name = Path(os.fspath(path)).name
    for suffix in MOLECULE_SUFFIXES:
        if name.lower().endswith(suffix):
            return name[: -len(suffix)]
    return name


def _attach_targets(recs: list[_Record], target: Any, from_mols: bool) -> None:
    if target is None:
        return
    if isinstance(target, str):
        if not from_mols:
            raise DatasetError(f"molecules: target={target!r} names a property, but SMILES strings have none; "
                               "give one target value per molecule")
        for r in recs:
            if not r.mol.HasProp(target):
                raise DatasetError(f"molecules: {r.where} has no property {target!r}")
            r.target = r.mol.GetProp(target)
        return
    values = _as_list(target)
    if values is None:
        raise DatasetError(f"molecules: target must be a property name or one value per molecule, "
                           f"got {type(target).__name__}")
    if len(values) != len(recs):
        raise DatasetError(f"molecules: {len(values)} target values for {len(recs)} molecules")
    for r, v in zip(recs, values):
        r.target = v


def _file_records(path: Path, smiles_column: str, target: Any) -> list[_Record]:
    if not path.is_file():
        raise DatasetError(f"{path}: no such molecule file")
    if target is not None and not isinstance(target, str):
        kind = "column" if path.name.lower().removesuffix(".gz").endswith(".csv") else "property"
        raise DatasetError(f"{path}: target must name a {kind}")
    lower = path.name.lower().removesuffix(".gz")
    if lower.endswith(".csv"):
        recs = _csv_records(path, smiles_column, target)
    elif lower.endswith(".smi"):
        if target is not None:
            raise DatasetError(f"{path}: a .smi file has no target column; use a CSV or an SDF for targets")
        recs = _smi_records(path)
    else:
        recs = _sdf_records(path, target)
    if not recs:
        raise DatasetError(f"{path}: no molecules in the file")
    return recs


#: the longest CSV field read (a SMILES string of a very large molecule fits many times over)
CSV_FIELD_LIMIT = 1 << 24


def open_binary(path: Path) -> Any:
    """A file's bytes, gunzipped on the fly when its name ends in ``.gz``."""
    return gzip.open(path, "rb") if path.name.lower().endswith(".gz") else open(path, "rb")


def _open_text(path: Path, encoding: str = "utf-8") -> Any:
    """A text file, gunzipped on the fly when its name ends in ``.gz`` (MOSES ships ``.csv.gz``)."""
    if path.name.lower().endswith(".gz"):
        return gzip.open(path, "rt", newline="", encoding=encoding)
    return open(path, newline="", encoding=encoding)


def _not_gzip(path: Path, exc: Exception) -> DatasetError:
    return DatasetError(f"{path}: not a readable gzip file ({type(exc).__name__}: {exc})")


def _not_utf8(path: Path, exc: UnicodeDecodeError) -> DatasetError:
    """The error for a file that is not UTF-8, naming the first line that is not. The text
    reader decodes in blocks, so its own position may be lines past the bad byte: find it."""
    try:
        with open_binary(path) as f:
            for lineno, raw in enumerate(f, 1):
                try:
                    raw.decode("utf-8")
                except UnicodeDecodeError as bad:
                    return DatasetError(f"{path} line {lineno}: not UTF-8 text ({bad.reason}); save the file as UTF-8")
    except (OSError, EOFError, zlib.error) as cut:  # a gzip stream that also ends early
        return _not_gzip(path, cut)
    return DatasetError(f"{path}: not UTF-8 text ({exc.reason}); save the file as UTF-8")


def _csv_records(path: Path, smiles_column: str, target: str | None) -> list[_Record]:
    csv.field_size_limit(max(csv.field_size_limit(), CSV_FIELD_LIMIT))
    recs: list[_Record] = []
    with _open_text(path, "utf-8-sig") as f:
        reader = csv.DictReader(f)
        try:
            columns = reader.fieldnames or []
            for col, what in ((smiles_column, "smiles_column"), (target, "target")):
                if col is not None and col not in columns:
                    raise DatasetError(f"{path}: no column {col!r} ({what}); the header has: {', '.join(columns)}")
            for i, row in enumerate(reader):
                where = f"{path.name} line {reader.line_num} (molecule {i})"
                smiles = (row.get(smiles_column) or "").strip()
                recs.append(_Record(where, smiles, None, None if target is None else row.get(target)))
        except UnicodeDecodeError as exc:
            raise _not_utf8(path, exc) from None
        except csv.Error as exc:
            raise DatasetError(f"{path} line {reader.line_num}: not a readable CSV row ({exc})") from None
        except (OSError, EOFError, zlib.error) as exc:  # a gzip stream cut short or corrupt
            raise _not_gzip(path, exc) from None
    return recs


def _smi_records(path: Path) -> list[_Record]:
    recs = []
    try:
        with _open_text(path) as f:
            for lineno, line in enumerate(f, 1):
                text = line.strip()
                if text and not text.startswith("#"):
                    recs.append(_Record(f"{path.name} line {lineno} (molecule {len(recs)})", text.split()[0], None))
    except UnicodeDecodeError as exc:
        raise _not_utf8(path, exc) from None
    except (OSError, EOFError, zlib.error) as exc:
        raise _not_gzip(path, exc) from None
    return recs


def _sdf_molecules(supplier: Any, path: Path) -> Iterator[Any]:
    """The supplier's molecules, its read failures as one :class:`DatasetError` naming the record."""

    i = 0
    while True:
        try:
            mol = next(supplier)
        except StopIteration:
            return
        except UnicodeDecodeError as exc:
            raise DatasetError(f"{path} record {i + 1}: not UTF-8 text ({exc.reason}); save the file as "
                               "UTF-8") from None
        except (OSError, EOFError, zlib.error) as exc:  # a gzip file cut short or corrupt
            raise DatasetError(f"{path}: cannot read the file ({exc})") from None
        except SystemError as exc:  # RDKit's reader wraps the file's own error (e.g. a bad gzip stream)
            cause = exc.__cause__ or exc.__context__
            raise DatasetError(f"{path}: cannot read the file ({cause or exc})") from None
        yield mol
        i += 1


def _sdf_records(path: Path, target: str | None) -> list[_Record]:
    chem = _chem()
    from rdkit import rdBase

    opener = gzip.open if path.name.lower().endswith(".gz") else open
    recs: list[_Record] = []
    with opener(path, "rb") as f, rdBase.BlockLogs():
        # removeHs=False: hydrogens are handled by the `hydrogens` option, like a Mol's
        for i, mol in enumerate(_sdf_molecules(chem.ForwardSDMolSupplier(f, sanitize=True, removeHs=False), path)):
            where = f"{path.name} record {i + 1} (molecule {i})"
            if mol is None:
                raise DatasetError(f"{where}: RDKit cannot read this record (bad connection table or valence)")
            recs.append(_Record(where, None, mol, None if target is None else _sdf_property(mol, target, where)))
    return recs


def _sdf_property(mol: Any, target: str, where: str) -> str:
    try:
        if not mol.HasProp(target):
            raise DatasetError(f"{where}: no property {target!r} (it has: {', '.join(mol.GetPropNames()) or 'none'})")
        return mol.GetProp(target)
    except UnicodeDecodeError as exc:
        raise DatasetError(f"{where}: a property is not UTF-8 text ({exc.reason}); save the file as UTF-8") from None


# ----------------------------------------------------------------------------- parsing
ON_ERROR = ("raise", "skip")
#: unparsable molecules named in the note of ``on_error: skip``
SKIPPED_SHOWN = 3


def _parse(recs: list[_Record], on_error: str = "raise") -> tuple[list[_Record], list[Any]]:
    """The records that parse and their RDKit Mols. An unparsable SMILES is one DatasetError
    naming the first (and how many), or with ``on_error="skip"`` left out, with a note on the
    ``gramdist`` logger giving the count and the first few with their lines."""
    chem = _chem()
    from rdkit import rdBase

    mols, bad = [], []
    with rdBase.BlockLogs():
        for r in recs:
            if r.mol is not None:
                mols.append(r.mol)
                continue
            mol = chem.MolFromSmiles(r.smiles) if r.smiles else None
            if mol is None:
                bad.append((r, _smiles_problem(chem, r.smiles)))
            mols.append(mol)
    if bad and on_error == "raise":
        r, why = bad[0]
        more = f"; {len(bad) - 1} more unparsable" if len(bad) > 1 else ""
        raise DatasetError(f"{r.where}: unparsable SMILES {r.smiles!r} ({why}){more} "
                           "(dataset.on_error: skip leaves them out)")
    if bad:
        shown = "; ".join(f"{r.where}: {r.smiles!r} ({why})" for r, why in bad[:SKIPPED_SHOWN])
        logging.getLogger("gramdist").warning(
            "gramdist: note: %d of %d molecules skipped as unparsable (on_error: skip): %s%s", len(bad), len(recs),
            shown, "; …" if len(bad) > SKIPPED_SHOWN else "")
    kept = [i for i, m in enumerate(mols) if m is not None]
    if not kept:
        raise DatasetError(f"{recs[0].where}: no parsable molecule in the input ({len(bad)} unparsable)")
    return [recs[i] for i in kept], [mols[i] for i in kept]


def _smiles_problem(chem: Any, smiles: str | None) -> str:
    if not smiles:
        return "empty"
    raw = chem.MolFromSmiles(smiles, sanitize=False)
    if raw is None:
        return "not valid SMILES syntax"
    try:
        chem.SanitizeMol(raw)
    except Exception as exc:  # RDKit raises its own exception types with the chemistry problem
        return str(exc).strip().splitlines()[0]
    return "RDKit rejects it"


# ----------------------------------------------------------------------------- features
def atom_label(atom: Any, *, aromaticity: bool = True, formal_charge: bool = True, hydrogen_count: bool = False) -> int:
    """The node label of an RDKit atom (formula in the module docstring).

    Raises ``ValueError`` when the formal charge is outside −50..49 or, with
    ``hydrogen_count``, the hydrogen count exceeds 9.
    """
    charge = atom.GetFormalCharge() if formal_charge else 0
    if not CHARGE_RANGE[0] <= charge <= CHARGE_RANGE[1]:
        raise ValueError(f"atom {atom.GetIdx()} ({atom.GetSymbol()}) has formal charge {charge}, "
                         f"outside {CHARGE_RANGE[0]}..{CHARGE_RANGE[1]}")
    n_h = atom.GetTotalNumHs() if hydrogen_count else 0
    if n_h > MAX_H_COUNT:
        raise ValueError(f"atom {atom.GetIdx()} ({atom.GetSymbol()}) has {n_h} hydrogens, more than {MAX_H_COUNT}")
    aromatic = int(bool(aromaticity and atom.GetIsAromatic()))
    return 10_000 * atom.GetAtomicNum() + 1_000 * aromatic + 10 * (charge + 50) + n_h


def bond_label(bond: Any) -> int:
    """The edge label of an RDKit bond: 1, 2, 3 single/double/triple, 4 aromatic, else 10 + type."""
    t = int(bond.GetBondType())
    return {1: 1, 2: 2, 3: 3, 12: 4}.get(t, 10 + t)


@dataclass
class _Options:
    aromaticity: bool
    formal_charge: bool
    hydrogens: str
    partial_charges: bool
    coordinates: bool


def _prepare(chem: Any, mol: Any, opt: _Options) -> Any:
    """A copy of ``mol`` with hydrogens and aromaticity as the options ask."""
    if opt.hydrogens == "explicit":
        mol = chem.AddHs(mol, addCoords=opt.coordinates and mol.GetNumConformers() > 0)
    else:
        mol = chem.RemoveHs(mol, sanitize=False)
    if not opt.aromaticity:
        mol = chem.Mol(mol)
        chem.Kekulize(mol, clearAromaticFlags=True)
    mol.UpdatePropertyCache(strict=False)
    return mol


@dataclass
class _MolGraph:
    edges: np.ndarray
    node_labels: np.ndarray
    edge_labels: np.ndarray
    node_attrs: np.ndarray | None
    symbols: list[str]


def _featurize(chem: Any, mol: Any, opt: _Options) -> _MolGraph:
    mol = _prepare(chem, mol, opt)
    labels = [atom_label(a, aromaticity=opt.aromaticity, formal_charge=opt.formal_charge,
                         hydrogen_count=opt.hydrogens == "count") for a in mol.GetAtoms()]
    bonds = list(mol.GetBonds())
    edges = np.array([(b.GetBeginAtomIdx(), b.GetEndAtomIdx()) for b in bonds], dtype=np.int64).reshape(-1, 2)
    cols = []
    if opt.partial_charges:
        from rdkit.Chem import rdPartialCharges

        rdPartialCharges.ComputeGasteigerCharges(mol)
        # united atoms: an atom's charge includes that of its implicit hydrogens (0 when they are
        # nodes), so a molecule's charges sum to its formal charge whatever `hydrogens` says
        charges = np.array([a.GetDoubleProp("_GasteigerCharge") + a.GetDoubleProp("_GasteigerHCharge")
                            for a in mol.GetAtoms()], dtype=np.float64)
        if not np.isfinite(charges).all():
            a = mol.GetAtomWithIdx(int(np.flatnonzero(~np.isfinite(charges))[0]))
            raise ValueError(f"no Gasteiger charge for atom {a.GetIdx()} ({a.GetSymbol()}): RDKit has no "
                             "parameters for this element")
        cols.append(charges[:, None])
    if opt.coordinates:
        if mol.GetNumConformers() == 0 or not mol.GetConformer().Is3D():
            raise ValueError("no 3D conformer (coordinates need an SDF or a Mol with 3D coordinates)")
        cols.append(np.asarray(mol.GetConformer().GetPositions(), dtype=np.float64).reshape(-1, 3))
    return _MolGraph(edges, np.asarray(labels, dtype=np.int64),
                     np.array([bond_label(b) for b in bonds], dtype=np.int64),
                     np.hstack(cols) if cols else None, [a.GetSymbol() for a in mol.GetAtoms()])


def _options(aromaticity: bool, formal_charge: bool, hydrogens: str, partial_charges: bool,
             coordinates: bool) -> _Options:
    if hydrogens not in HYDROGENS:
        raise DatasetError(f"molecules: hydrogens must be one of {', '.join(HYDROGENS)}, got {hydrogens!r}")
    return _Options(bool(aromaticity), bool(formal_charge), hydrogens, bool(partial_charges), bool(coordinates))


def _graphs(recs: list[_Record], mols: list[Any], opt: _Options) -> Iterator[_MolGraph]:
    chem = _chem()
    for r, mol in zip(recs, mols):
        try:
            yield _featurize(chem, mol, opt)
        except DatasetError:
            raise
        except Exception as exc:  # ValueError above or RDKit's own (e.g. a kekulisation failure)
            text = f" {r.smiles!r}" if r.smiles else ""
            raise DatasetError(f"{r.where}{text}: {str(exc).strip().splitlines()[0]}") from None


def _targets(recs: list[_Record]) -> np.ndarray | None:
    """``y`` from the raw target values (see the module docstring)."""
    raw = [r.target for r in recs]
    if all(v is None for v in raw):
        return None
    for r in recs:
        if r.target is None or (isinstance(r.target, str) and not r.target.strip()):
            raise DatasetError(f"{r.where}: no target value")
    numbers = [_number(v) for v in raw]
    if all(x is not None for x in numbers):
        bad = next((r for r, x in zip(recs, numbers) if not math.isfinite(x)), None)
        if bad is not None:
            raise DatasetError(f"{bad.where}: target {bad.target!r} is not finite")
        values = np.asarray(numbers, dtype=np.float64)
        return values.astype(np.int64) if np.all(values == np.round(values)) else values
    if any(x is not None for x in numbers) and any(x is None for x in numbers):
        r = next(r for r, x in zip(recs, numbers) if x is None)
        raise DatasetError(f"{r.where}: target {r.target!r} is not a number, but other molecules' targets are")
    names = [str(v).strip() for v in raw]
    code = {v: i for i, v in enumerate(sorted(set(names)))}
    return np.array([code[v] for v in names], dtype=np.int64)


def _number(v: Any) -> float | None:
    if isinstance(v, bool):
        return float(v)
    try:
        return float(v.strip() if isinstance(v, str) else v)
    except (TypeError, ValueError):
        return None


# ----------------------------------------------------------------------------- public
#: the conversion options of :func:`molecules_to_batch` and their defaults
CONVERSION_OPTIONS: dict[str, Any] = {"aromaticity": True, "formal_charge": True, "hydrogens": "implicit",
                                      "partial_charges": False, "coordinates": False, "on_error": "raise"}


def _conversion(options: dict[str, Any]) -> tuple[_Options, str]:
    """The options of a conversion, checked: (atom and bond options, ``on_error``)."""
    unknown = sorted(set(options) - set(CONVERSION_OPTIONS))
    if unknown:
        raise DatasetError(f"molecules: unknown option {unknown[0]!r} (allowed: {', '.join(CONVERSION_OPTIONS)})")
    o = {**CONVERSION_OPTIONS, **options}
    if o["on_error"] not in ON_ERROR:
        raise DatasetError(f"molecules: on_error must be one of {', '.join(ON_ERROR)}, got {o['on_error']!r}")
    return _options(o["aromaticity"], o["formal_charge"], o["hydrogens"], o["partial_charges"], o["coordinates"]), \
        o["on_error"]


def molecules_to_batch(
    X: Any,
    *,
    smiles_column: str = "smiles",
    target: str | Sequence | np.ndarray | None = None,
    **options: Any,
) -> GraphBatch:
    """Convert molecules to a :class:`GraphBatch`, one graph per molecule.

    Parameters
    ----------
    X : RDKit Mol, SMILES str, list of either, or path of an .sdf / .sdf.gz / .csv / .smi file
        See the module docstring for the rule that tells molecules from other inputs.
    smiles_column : str
        Column of a CSV file holding the SMILES.
    target : str, array-like, ``{"descriptor": NAME}`` or None
        A CSV column, an SDF property or a ``Mol`` property name, or one value per molecule;
        becomes ``y`` (int64 class labels or float64 targets, see the module docstring); or an
        RDKit descriptor computed per molecule (float64).
    **options
        The conversion options below (:data:`CONVERSION_OPTIONS`), by keyword.
    aromaticity : bool
        Aromatic atoms get their own labels and aromatic bonds label 4; off, the molecule is
        kekulised.
    formal_charge : bool
        The formal charge is part of the atom label.
    hydrogens : {"implicit", "explicit", "count"}
        Hydrogens as nothing, as nodes, or as a count in each atom's label.
    partial_charges : bool
        Gasteiger partial charges as a node attribute column.
    coordinates : bool
        The 3D conformer's x, y, z as node attribute columns (after the charge, if both).
    on_error : {"raise", "skip"}
        An unparsable SMILES is an error (the default), or is left out with a note (on the
        ``gramdist`` logger) giving how many and the first few with their lines.

    Returns
    -------
    GraphBatch
        ``G`` graphs: ``node_labels`` (N,) int64 atom codes, ``edge_labels`` (E,) int64 bond
        codes, ``node_attrs`` (N, 1), (N, 3) or (N, 4) float64 when asked, ``y`` (G,) when a
        target is given, ``graph_ids`` (G,) the molecule's index in the input (0..G-1 unless
        molecules were skipped: the ids then keep their input positions).

    Raises
    ------
    DatasetError
        Empty input, a list mixing kinds of input, an unparsable SMILES or SDF record, a
        missing column/property/target value, or a molecule whose requested attributes are
        undefined; the message names the molecule's index (and file line) and its SMILES.
        Nothing is returned in part.
    """
    opt, on_error = _conversion(options)
    descriptor = descriptor_target(target)
    all_recs, name = _records(X, smiles_column, None if descriptor else target)
    recs, mols = _parse(all_recs, on_error)
    if descriptor:
        _compute_descriptor(recs, mols, descriptor)
    batch = _to_batch(recs, mols, opt, name, float_target=bool(descriptor))
    if len(recs) < len(all_recs):
        position = {id(r): i for i, r in enumerate(all_recs)}
        batch.graph_ids = np.array([position[id(r)] for r in recs], dtype=np.int64)
    return batch


def _to_batch(recs: list[_Record], mols: list[Any], opt: _Options, name: str,
              float_target: bool = False) -> GraphBatch:
    graphs = list(_graphs(recs, mols, opt))
    y = _targets(recs)
    batch = GraphBatch.from_graphs(
        [g.edges for g in graphs],
        [len(g.node_labels) for g in graphs],
        node_labels=[g.node_labels for g in graphs],
        node_attrs=None if not (opt.partial_charges or opt.coordinates) else [g.node_attrs for g in graphs],
        edge_labels=[g.edge_labels for g in graphs],
        y=y.astype(np.float64) if float_target and y is not None else y,
    )
    batch.name = name
    return batch


def records_to_batch(recs: list[_Record], name: str, descriptor: str | None = None, **options: Any) -> GraphBatch:
    """Records already read from a file (a block of a :class:`~gramdist.datasets.lazy.LazyMolecules`)
    parsed and converted as :func:`molecules_to_batch` converts a file's: the same options,
    one error for the first unparsable SMILES; ``descriptor``: the target computed per molecule."""
    opt, _ = _conversion({**options, "on_error": "raise"})
    recs, mols = _parse(recs)
    if descriptor:
        _compute_descriptor(recs, mols, descriptor)
    return _to_batch(recs, mols, opt, name, float_target=bool(descriptor))


def molecules_to_networkx(
    X: Any,
    *,
    smiles_column: str = "smiles",
    aromaticity: bool = True,
    formal_charge: bool = True,
    hydrogens: str = "implicit",
    partial_charges: bool = False,
    coordinates: bool = False,
) -> list:
    """One ``networkx.Graph`` per molecule, with the labels of :func:`molecules_to_batch`.

    Nodes are the atom indices with data ``label`` (the atom code), ``symbol`` (the element)
    and, when asked, ``attr`` (list of floats: charge, then x, y, z); edges have ``label``
    (the bond code). ``gramdist.datasets.from_networkx(graphs, node_label="label",
    edge_label="label", node_attr="attr" or None)`` then gives the same batch as
    :func:`molecules_to_batch` on the same molecules and options (targets aside).
    """
    nx = require_networkx()

    opt = _options(aromaticity, formal_charge, hydrogens, partial_charges, coordinates)
    recs, _ = _records(X, smiles_column, None)
    out = []
    recs, mols = _parse(recs)
    for g in _graphs(recs, mols, opt):
        G = nx.Graph()
        for i, (lab, sym) in enumerate(zip(g.node_labels.tolist(), g.symbols)):
            G.add_node(i, label=lab, symbol=sym)
            if g.node_attrs is not None:
                G.nodes[i]["attr"] = g.node_attrs[i].tolist()
        G.add_edges_from((u, v, {"label": lab}) for (u, v), lab in zip(g.edges.tolist(), g.edge_labels.tolist()))
        out.append(G)
    return out
