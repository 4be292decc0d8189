import logging

import hydra
from omegaconf import DictConfig, OmegaConf

log = logging.getLogger(__name__)
@hydra.main(version_base=None, config_path=None, config_name=None)
def main(cfg: DictConfig) -> None:
    log.info("config:\n" + OmegaConf.to_yaml(cfg))
    for epoch in range(3):
        log.info(f"epoch {epoch}: train/loss={1.0/(epoch+1):.3f} val/score={0.3+0.1*epoch:.2f}")
main()
