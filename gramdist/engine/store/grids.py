"""How a store cuts its data: the tiles of a Gram and the chunks of a feature store (pure)."""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class TileGrid:
    """The tiles of an (R, C) Gram with square tiles of side ``tile``."""

    n_rows: int
    n_cols: int
    tile: int
    symmetric: bool

    @property
    def shape(self) -> tuple[int, int]:
        return (math.ceil(self.n_rows / self.tile), math.ceil(self.n_cols / self.tile))

    def row_range(self, i: int) -> tuple[int, int]:
        return i * self.tile, min((i + 1) * self.tile, self.n_rows)

    def col_range(self, j: int) -> tuple[int, int]:
        return j * self.tile, min((j + 1) * self.tile, self.n_cols)

    def tiles(self) -> list[tuple[int, int]]:
        """Tiles to compute, row-major; only j >= i when symmetric (mirrors fill the rest)."""
        r, c = self.shape
        if self.symmetric:
            return [(i, j) for i in range(r) for j in range(i, c)]
        return [(i, j) for i in range(r) for j in range(c)]

    def count_done(self, mask) -> int:
        """Tiles of this grid (the ones computed) that ``mask`` marks done."""
        return sum(int(mask[i, j]) for i, j in self.tiles())

    def entries(self, tile: tuple[int, int]) -> int:
        """Gram entries of one tile (its mirror not counted)."""
        (r0, r1), (c0, c1) = self.row_range(tile[0]), self.col_range(tile[1])
        return (r1 - r0) * (c1 - c0)

    def label(self, tile: tuple[int, int]) -> str:
        (r0, r1), (c0, c1) = self.row_range(tile[0]), self.col_range(tile[1])
        return f"tile ({tile[0]}, {tile[1]}): rows {r0}..{r1 - 1}, columns {c0}..{c1 - 1}"


@dataclass(frozen=True)
class ChunkGrid:
    """``n_graphs`` graphs cut into chunks of ``chunk`` consecutive graphs."""

    n_graphs: int
    chunk: int

    @property
    def n_chunks(self) -> int:
        return math.ceil(self.n_graphs / self.chunk)

    def range(self, i: int) -> tuple[int, int]:
        return i * self.chunk, min((i + 1) * self.chunk, self.n_graphs)


def kept_tiles(old: TileGrid, new: TileGrid) -> list[tuple[int, int]]:
    """Tiles of ``old`` that ``new`` (the grown grid) holds with the same rows and columns:
    those an append keeps. A tile straddling the old edge grows, so it is not kept."""
    r, c = old.shape
    return [(i, j) for i, j in new.tiles() if i < r and j < c
            and old.row_range(i) == new.row_range(i) and old.col_range(j) == new.col_range(j)]
