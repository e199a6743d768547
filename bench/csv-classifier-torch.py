# The CSV classifier of examples/csv-classifier.ini as a PyTorch user would write it: read
# the CSV files with NumPy, standardise by the training rows' moments, an MLP 256-128 with
# ReLU, Adam at 1e-3, batches of 64 from a shuffling DataLoader, then the held-out
# accuracy. Run by bench/bench-csv.sh, which times the whole process.
#   python3 bench/csv-classifier-torch.py TRAIN.csv TEST.csv STEPS THREADS
import sys

import numpy as np
import torch

train_path, test_path, steps, threads = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
torch.set_num_threads(threads)
torch.manual_seed(0)


def load(path):
    with open(path) as f:
        header = f.readline().strip().split(",")
    rows = np.loadtxt(path, delimiter=",", skiprows=1, dtype=np.float32)
    label = header.index("label")
    y = rows[:, label].astype(np.int64)
    x = np.delete(rows, label, axis=1)
    return x, y


x, y = load(train_path)
tx, ty = load(test_path)
mean, std = x.mean(axis=0), np.maximum(x.std(axis=0), 1e-6)
x, tx = (x - mean) / std, (tx - mean) / std
classes = int(max(y.max(), ty.max())) + 1

model = torch.nn.Sequential(
    torch.nn.Linear(x.shape[1], 256), torch.nn.ReLU(),
    torch.nn.Linear(256, 128), torch.nn.ReLU(),
    torch.nn.Linear(128, classes))
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
loader = torch.utils.data.DataLoader(
    torch.utils.data.TensorDataset(torch.from_numpy(x), torch.from_numpy(y)),
    batch_size=64, shuffle=True, drop_last=True)

step = 0
while step < steps:
    for xb, yb in loader:
        loss = torch.nn.functional.cross_entropy(model(xb), yb)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        step += 1
        if step == steps:
            break

with torch.no_grad():
    predicted = model(torch.from_numpy(tx)).argmax(dim=1).numpy()
print("accuracy %.4f" % float((predicted == ty).mean()))
