#!/usr/bin/env python3
"""ckpt-reseal.py DIR FILE KEY VALUE: as an attacker would, sets the metadata KEY of
DIR/FILE (a safetensors file of a ksdist checkpoint) to VALUE, then re-seals it: its
"sha256" (the SHA-256 of the whole file with those 64 digits read as zeros) and, for a
weights file, the "model_sha256" of the optimizer file beside it, re-sealed in turn."""
import hashlib, json, os, struct, sys

ZEROS = "0" * 64


def load(path):
    with open(path, "rb") as f:
        raw = f.read()
    n = struct.unpack("<Q", raw[:8])[0]
    return json.loads(raw[8:8 + n]), raw[8 + n:]


def seal_and_write(path, header, data):
    header["__metadata__"]["sha256"] = ZEROS
    text = json.dumps(header, separators=(",", ":"))
    text += " " * (-len(text) % 8)  # safetensors pads its header to 8 bytes
    blob = text.encode()
    digest = hashlib.sha256(struct.pack("<Q", len(blob)) + blob + data).hexdigest()
    blob = blob.replace(('"sha256":"%s"' % ZEROS).encode(), ('"sha256":"%s"' % digest).encode(), 1)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(blob)) + blob + data)
    return digest


def main():
    d, name, key, value = sys.argv[1:5]
    header, data = load(os.path.join(d, name))
    header["__metadata__"][key] = value
    digest = seal_and_write(os.path.join(d, name), header, data)
    # the optimizer's state names the weights it goes with by their seal
    for other in sorted(os.listdir(d)):
        if other.startswith("optimizer") and other.endswith(".safetensors") and other != name:
            h, data = load(os.path.join(d, other))
            meta = h["__metadata__"]
            if meta.get("model_sha256") and (name == "model.safetensors" or name in other):
                meta["model_sha256"] = digest
                seal_and_write(os.path.join(d, other), h, data)


main()
