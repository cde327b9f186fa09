"""A WL-kernel SVM on networkx graphs, the kernel's h and the SVM's C chosen by GridSearchCV.

    python examples/networkx_gridsearch.py

The graphs are MUTAG's 188 molecules (built into gramdist, so this runs offline), turned into
networkx graphs whose nodes carry an element symbol under "atom" and whose edges carry a bond
type under "bond": graphs as a user usually holds them. The accuracy is estimated by nested
cross-validation: the grid search (inner CV) runs inside every fold of the outer CV.
"""

from __future__ import annotations

import networkx as nx
from sklearn.model_selection import GridSearchCV, StratifiedKFold, cross_val_score
from sklearn.pipeline import Pipeline
from sklearn.svm import SVC

from gramdist import GramTransformer
from gramdist.datasets import load_dataset, to_networkx
from gramdist.kernels import WLSubtreeKernel

ATOMS = ["C", "N", "O", "F", "I", "Cl", "Br"]  # MUTAG's node labels 0..6 (its README.txt)
BONDS = ["aromatic", "single", "double", "triple"]

mutag = load_dataset("MUTAG")
graphs = []
for g in to_networkx(mutag):
    nx.set_node_attributes(g, {v: ATOMS[d["label"]] for v, d in g.nodes(data=True)}, "atom")
    nx.set_edge_attributes(g, {(u, v): BONDS[d["label"]] for u, v, d in g.edges(data=True)}, "bond")
    graphs.append(g)
y = mutag.y

pipe = Pipeline([
    ("gram", GramTransformer(WLSubtreeKernel(h=3), normalize=True, node_label="atom")),
    ("svc", SVC(kernel="precomputed")),
])
search = GridSearchCV(pipe, {"gram__kernel__h": [1, 2, 3, 4], "svc__C": [1.0, 10.0, 100.0]},
                      cv=StratifiedKFold(3, shuffle=True, random_state=0))

scores = cross_val_score(search, graphs, y, cv=StratifiedKFold(5, shuffle=True, random_state=1))
print(f"nested-CV accuracy: {100 * scores.mean():.1f} ± {100 * scores.std():.1f} % over {len(scores)} folds")

search.fit(graphs, y)
print(f"chosen on all {len(graphs)} graphs: h = {search.best_params_['gram__kernel__h']}, "
      f"C = {search.best_params_['svc__C']:g} (inner-CV accuracy {100 * search.best_score_:.1f} %)")
