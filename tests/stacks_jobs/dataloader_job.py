"""A rank whose DataLoader worker is stuck in the dataset: item 1 never loads (worker 1 sleeps in __getitem__).

Run with RANK/LOCAL_RANK/WORLD_SIZE set as torchrun sets them. Writes its pid to STACKS_READY/main
once the first batch has arrived (the worker that owns item 1 is in __getitem__ by then).
"""

import os
import time
from pathlib import Path

from torch.utils.data import DataLoader, Dataset


class Prompts(Dataset):
    def __len__(self) -> int:
        return 8

    def __getitem__(self, i: int) -> int:
        if i == 1:
            time.sleep(600)  # a sample that never loads (a hung file system, a remote image)
        return i


def main() -> None:
    loader = DataLoader(Prompts(), batch_size=1, num_workers=2)
    it = iter(loader)
    next(it)
    Path(os.environ["STACKS_READY"], "main").write_text(str(os.getpid()))
    next(it)  # waits for item 1 forever


if __name__ == "__main__":
    main()
