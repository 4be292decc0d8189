import torch
import torch.distributed as dist
import torch.nn as nn

dist.init_process_group("gloo")
rank = dist.get_rank()
torch.manual_seed(0)
model = nn.parallel.DistributedDataParallel(nn.Linear(16, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(1, 21):
    x = torch.randn(32, 16)
    y = x.sum(1, keepdim=True)
    loss = ((model(x) - y) ** 2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    if rank == 0 and step % 2 == 0:
        print(f"step:{step} - loss:{loss.item():.4f} - lr:0.1 - world_size:{dist.get_world_size()}", flush=True)
dist.barrier()
if rank == 0:
    print("training finished", flush=True)
dist.destroy_process_group()
