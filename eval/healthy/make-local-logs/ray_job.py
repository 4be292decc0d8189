import time

import ray

ray.init(num_cpus=2, include_dashboard=False)
@ray.remote
class Worker:
    def step(self, i):
        print(f"worker step {i} done", flush=True)
        return i * i
@ray.remote
def square(x):
    return x * x
print("cluster resources:", ray.cluster_resources())
ws = [Worker.remote() for _ in range(2)]
print(ray.get([w.step.remote(i) for i, w in enumerate(ws)]))
print(sum(ray.get([square.remote(i) for i in range(20)])))
time.sleep(1)
ray.shutdown()
