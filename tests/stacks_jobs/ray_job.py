"""A Ray driver that waits in ray.get while one actor is stuck in a user function.

Two actors of one class: `work(stuck=True)` never returns, `work(stuck=False)` returns at once
(that actor is then idle). With STACKS_RAY_ADDRESS it joins that cluster and puts both actors on
the node STACKS_NODE. Writes STACKS_READY/driver when both tasks have started.
"""

import os
import time
from pathlib import Path

import ray


@ray.remote(num_cpus=0)
class Rollout:
    def work(self, stuck: bool, ready: str) -> int:
        Path(ready, f"actor-{os.getpid()}").write_text(str(os.getpid()))
        if stuck:
            self.score_forever()
        return 0

    def score_forever(self) -> None:
        while True:
            time.sleep(1)


def main() -> None:
    ready = os.environ["STACKS_READY"]
    address, node = os.environ.get("STACKS_RAY_ADDRESS"), os.environ.get("STACKS_NODE")
    if address:  # an existing cluster; the actors on the node STACKS_NODE
        ray.init(address=address, log_to_driver=False)
    else:
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    opts = {}
    if node:
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        opts["scheduling_strategy"] = NodeAffinitySchedulingStrategy(node, soft=False)
    a, b = Rollout.options(**opts).remote(), Rollout.options(**opts).remote()
    refs = [a.work.remote(True, ready), b.work.remote(False, ready)]
    ray.get(refs[1])
    Path(ready, "driver").write_text(str(os.getpid()))
    ray.get(refs)


if __name__ == "__main__":
    main()
