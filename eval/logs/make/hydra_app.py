"""A tiny Hydra app with a structured trainer config; an unknown override fails the way verl's does."""

from dataclasses import dataclass, field

import hydra
from hydra.core.config_store import ConfigStore
from omegaconf import MISSING, OmegaConf


@dataclass
class TrainerCfg:
    total_epochs: int = 1
    n_gpus_per_node: int = 1
    project_name: str = "kb-demo"


@dataclass
class DataCfg:
    train_files: str = MISSING
    train_batch_size: int = 8


@dataclass
class Cfg:
    trainer: TrainerCfg = field(default_factory=TrainerCfg)
    data: DataCfg = field(default_factory=DataCfg)


ConfigStore.instance().store(name="ppo_trainer", node=Cfg)


@hydra.main(version_base=None, config_name="ppo_trainer")
def main(cfg: Cfg) -> None:
    print("config:\n" + OmegaConf.to_yaml(cfg), flush=True)
    print(f"loading {cfg.data.train_files}", flush=True)  # a MISSING value raises here
    print("training finished", flush=True)


if __name__ == "__main__":
    main()
