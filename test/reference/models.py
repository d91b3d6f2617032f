"""The three example models in PyTorch, with Mnemo's parameter names.

Each mirrors its .mn file op for op, so that loading Mnemo's initial weights
and replaying its batches must reproduce its losses and updated weights.
"""
import math

import numpy as np
import torch
import torch.utils.checkpoint
import torch.nn.functional as F
from torch import nn


F32_MEAN = float(np.float32(0.2860))
F32_STD = float(np.float32(0.3530))


class MLP(nn.Module):
    def __init__(self, hp):
        super().__init__()
        self.fc1 = nn.Linear(28 * 28, hp["hidden"])
        self.fc2 = nn.Linear(hp["hidden"], hp["classes"])

    def forward(self, batch):
        # examples/mlp.mn's standardization; its literals are f32 constants,
        # so they are rounded to f32 here too (which matters in f64 runs).
        x = batch["image"].reshape(batch["image"].shape[0], 28 * 28)
        x = (x - F32_MEAN) / F32_STD
        logits = self.fc2(F.relu(self.fc1(x)))
        return F.cross_entropy(logits, batch["label"].long())


class DenseBlock(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.fc = nn.Linear(width, width)

    def forward(self, x):
        return x + F.relu(self.fc(x))


def run_blocks(blocks, h, checkpointed):
    """Each block in turn; with `checkpointed`, as torch.utils.checkpoint per
    block (what --remat=all does)."""
    for block in blocks:
        if checkpointed:
            h = torch.utils.checkpoint.checkpoint(block, h, use_reentrant=False)
        else:
            h = block(h)
    return h


class DeepMLP(nn.Module):
    """examples/deep-mlp.mn."""

    def __init__(self, hp):
        super().__init__()
        self.inp = nn.Linear(28 * 28, hp["width"])
        self.blocks = nn.ModuleList(DenseBlock(hp["width"]) for _ in range(hp["depth"]))
        self.out = nn.Linear(hp["width"], hp["classes"])
        self.checkpointed = hp.get("checkpoint", False)

    def forward(self, batch):
        x = batch["image"].reshape(batch["image"].shape[0], 28 * 28)
        x = (x - F32_MEAN) / F32_STD
        h = run_blocks(self.blocks, F.relu(self.inp(x)), self.checkpointed)
        return F.cross_entropy(self.out(h), batch["label"].long())


class ConvBlock(nn.Module):
    def __init__(self, cin, cout, kernel=3, pool=2):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, kernel, padding=kernel // 2)
        self.pool = pool

    def forward(self, x):
        return F.max_pool2d(F.relu(self.conv(x)), self.pool)


class CNN(nn.Module):
    def __init__(self, hp):
        super().__init__()
        c = hp["channels"]
        self.block1 = ConvBlock(1, c)
        self.block2 = ConvBlock(c, 2 * c)
        self.fc = nn.Linear(2 * c * 7 * 7, hp["classes"])

    def forward(self, batch):
        h = self.block2(self.block1(batch["image"]))
        logits = self.fc(torch.flatten(h, 1))
        return F.cross_entropy(logits, batch["label"].long())


class Attention(nn.Module):
    # "math" (the reference: softmax of the masked scores, as Mnemo's
    # attention is written) or "sdpa" (F.scaled_dot_product_attention, which
    # runs FlashAttention or cuDNN's fused kernel on a GPU: the benchmark's
    # PyTorch side, bench/gpu_pytorch.py --attention sdpa).
    kind = "math"

    def __init__(self, dim, heads):
        super().__init__()
        self.heads = heads
        self.wq = nn.Linear(dim, dim)
        self.wk = nn.Linear(dim, dim)
        self.wv = nn.Linear(dim, dim)
        self.wo = nn.Linear(dim, dim)

    def forward(self, x):
        B, T, C = x.shape
        D = C // self.heads
        split = lambda t: t.view(B, T, self.heads, D).transpose(1, 2)
        q, k, v = split(self.wq(x)), split(self.wk(x)), split(self.wv(x))
        if Attention.kind == "sdpa":
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            scores = q @ k.transpose(-2, -1) / math.sqrt(D)
            # On the scores' device: the model runs on a GPU too.
            mask = torch.tril(torch.ones(T, T, dtype=torch.bool, device=x.device))
            scores = scores.masked_fill(~mask, float("-inf"))
            y = F.softmax(scores, dim=-1) @ v
        return self.wo(y.transpose(1, 2).reshape(B, T, C))


class MLPBlock(nn.Module):
    def __init__(self, dim, hidden):
        super().__init__()
        self.fc = nn.Linear(dim, hidden)
        self.proj = nn.Linear(hidden, dim)

    def forward(self, x):
        return self.proj(F.gelu(self.fc(x), approximate="tanh"))


class Block(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.ln1 = nn.LayerNorm(dim)
        self.attn = Attention(dim, heads)
        self.ln2 = nn.LayerNorm(dim)
        self.mlp = MLPBlock(dim, 4 * dim)

    def forward(self, x):
        h = x + self.attn(self.ln1(x))
        return h + self.mlp(self.ln2(h))


class GPT(nn.Module):
    def __init__(self, hp):
        super().__init__()
        self.wte = nn.Embedding(hp["vocab"], hp["dim"])
        self.wpe = nn.Embedding(hp["context"], hp["dim"])
        self.blocks = nn.ModuleList(Block(hp["dim"], hp["heads"]) for _ in range(hp["layers"]))
        self.ln_f = nn.LayerNorm(hp["dim"])
        self.checkpointed = hp.get("checkpoint", False)

    def forward(self, batch):
        tokens = batch["tokens"].long()
        h = self.wte(tokens) + self.wpe.weight
        h = run_blocks(self.blocks, h, self.checkpointed)
        logits = self.ln_f(h) @ self.wte.weight.T
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                               batch["next"].long().reshape(-1))


class SoftplusMLP(MLP):
    """test/reference/models/softplus.mn: the MLP's layers, unstandardized
    pixels, and softplus with PyTorch's beta and threshold as the hidden
    activation."""

    def forward(self, batch):
        x = batch["image"].reshape(batch["image"].shape[0], 28 * 28)
        h = F.softplus(self.fc1(x), beta=2.0, threshold=1.0)
        return F.cross_entropy(self.fc2(h), batch["label"].long())


class PadMLP(nn.Module):
    """test/reference/models/pad.mn: F.pad in constant mode, cropping the
    image's rows and padding its columns with zeros, then padding the
    hidden activations with -0.25 (so that the gradient flows through a
    pad with a value)."""

    def __init__(self, hp):
        super().__init__()
        self.fc1 = nn.Linear(26 * 30, hp["hidden"])
        self.fc2 = nn.Linear(hp["hidden"] + 4, hp["classes"])

    def forward(self, batch):
        n = batch["image"].shape[0]
        x = F.pad(batch["image"], (1, 1, -1, -1))
        h = F.relu(self.fc1(x.reshape(n, 26 * 30)))
        logits = self.fc2(F.pad(h, (3, 1), value=-0.25))
        return F.cross_entropy(logits, batch["label"].long())


class MaskMLP(MLP):
    """test/reference/models/masks.mn: masks from comparisons of activations
    and of the integer labels, combined with &, | and ~, used through
    torch.where and as a float feature."""

    def forward(self, batch):
        n = batch["image"].shape[0]
        h = self.fc1(batch["image"].reshape(n, 28 * 28))
        inside = (h > -0.5) & ~(h >= 0.5)
        g = torch.where(inside, h, 0.1 * h)
        g = torch.where((h < -1.0) | (h > 1.0), g * 0.5, g)
        three = (batch["label"] == 3).to(h.dtype)
        logits = self.fc2(g + three.reshape(n, 1) * 0.25)
        return F.cross_entropy(logits, batch["label"].long())


class LogSumExpMLP(nn.Module):
    """test/reference/models/logsumexp.mn: torch.logsumexp over groups of
    hidden features, along the innermost axis and along a middle one."""

    def __init__(self, hp):
        super().__init__()
        self.quarter = hp["hidden"] // 4
        self.fc1 = nn.Linear(28 * 28, hp["hidden"])
        self.fc2 = nn.Linear(2 * self.quarter, hp["classes"])

    def forward(self, batch):
        n = batch["image"].shape[0]
        h = self.fc1((batch["image"].reshape(n, 28 * 28) - F32_MEAN) / F32_STD)
        near = torch.logsumexp(h.reshape(n, self.quarter, 4), dim=2)
        far = torch.logsumexp(h.reshape(n, 4, self.quarter), dim=1,
                              keepdim=True)
        logits = self.fc2(torch.cat([near, far.reshape(n, self.quarter)], 1))
        return F.cross_entropy(logits, batch["label"].long())


class ClassifierLoss(nn.Module):
    """test/reference/models/classifier-loss.mn: an embedding, tanh, and an
    untied head whose cross-entropy ignores target -1 and smooths the labels
    by 0.1 (Mnemo fuses the head and the loss; PyTorch keeps the logits)."""

    def __init__(self, hp):
        super().__init__()
        self.wte = nn.Parameter(torch.empty(hp["vocab"], hp["dim"]))
        self.head = nn.Parameter(torch.empty(hp["dim"], hp["vocab"]))

    def forward(self, batch):
        logits = torch.tanh(self.wte[batch["tokens"].long()]) @ self.head
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                               batch["next"].long().reshape(-1),
                               ignore_index=-1, label_smoothing=0.1)


class RMSNorm(nn.Module):
    """torch.nn.RMSNorm (PyTorch 2.4; written out for 1.13)."""

    def __init__(self, dim, eps):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat([-x[..., half:], x[..., :half]], dim=-1)


def rotary(x, base):
    """Hugging Face's LLaMA / GPT-NeoX rotary embedding of [B, H, T, D]."""
    T, D = x.shape[-2], x.shape[-1]
    inv_freq = 1.0 / (base ** (torch.arange(0, D, 2, dtype=torch.float32, device=x.device) / D))
    angles = torch.outer(torch.arange(T, dtype=torch.float32, device=x.device), inv_freq)
    emb = torch.cat([angles, angles], dim=-1).to(x.dtype)
    return x * emb.cos() + rotate_half(x) * emb.sin()


class LlamaAttention(nn.Module):
    """Causal grouped-query attention with rotary embeddings, no biases;
    the math form (softmax of the masked scores) as the reference."""

    def __init__(self, dim, heads, kv_heads, base):
        super().__init__()
        self.heads, self.kv_heads, self.base = heads, kv_heads, base
        self.head_dim = dim // heads
        self.wq = nn.Linear(dim, dim, bias=False)
        self.wk = nn.Linear(dim, kv_heads * self.head_dim, bias=False)
        self.wv = nn.Linear(dim, kv_heads * self.head_dim, bias=False)
        self.wo = nn.Linear(dim, dim, bias=False)

    def forward(self, x):
        B, T, C = x.shape
        D = self.head_dim
        split = lambda t, h: t.view(B, T, h, D).transpose(1, 2)
        q = rotary(split(self.wq(x), self.heads), self.base)
        k = rotary(split(self.wk(x), self.kv_heads), self.base)
        v = split(self.wv(x), self.kv_heads)
        group = self.heads // self.kv_heads
        k = k.repeat_interleave(group, dim=1)
        v = v.repeat_interleave(group, dim=1)
        scores = q @ k.transpose(-2, -1) / math.sqrt(D)
        mask = torch.tril(torch.ones(T, T, dtype=torch.bool, device=x.device))
        scores = scores.masked_fill(~mask, float("-inf"))
        y = F.softmax(scores, dim=-1) @ v
        return self.wo(y.transpose(1, 2).reshape(B, T, C))


class SwiGLU(nn.Module):
    def __init__(self, dim, hidden):
        super().__init__()
        self.w1 = nn.Linear(dim, hidden, bias=False)
        self.w2 = nn.Linear(hidden, dim, bias=False)
        self.w3 = nn.Linear(dim, hidden, bias=False)

    def forward(self, x):
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class LlamaBlock(nn.Module):
    def __init__(self, hp):
        super().__init__()
        dim = hp["dim"]
        self.attention_norm = RMSNorm(dim, 1e-6)
        self.attention = LlamaAttention(dim, hp["heads"], hp["kv_heads"], 10000.0)
        self.ffn_norm = RMSNorm(dim, 1e-6)
        self.feed_forward = SwiGLU(dim, hp["hidden"])

    def forward(self, x):
        h = x + self.attention(self.attention_norm(x))
        return h + self.feed_forward(self.ffn_norm(h))


class Llama(nn.Module):
    """examples/llama.mn."""

    def __init__(self, hp):
        super().__init__()
        self.tok_embeddings = nn.Embedding(hp["vocab"], hp["dim"])
        self.blocks = nn.ModuleList(LlamaBlock(hp) for _ in range(hp["layers"]))
        self.norm = RMSNorm(hp["dim"], 1e-6)
        self.head = nn.Linear(hp["dim"], hp["vocab"], bias=False)

    def forward(self, batch):
        h = self.tok_embeddings(batch["tokens"].long())
        h = run_blocks(self.blocks, h, False)
        logits = self.head(self.norm(h))
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                               batch["next"].long().reshape(-1))


class BatchNormNet(nn.Module):
    """test/reference/models/batch-norm.mn: BatchNorm2d after a convolution
    without bias, BatchNorm1d without affine parameters after a linear
    layer; their running statistics are buffers."""

    def __init__(self, hp):
        super().__init__()
        c, hidden = hp["channels"], hp["hidden"]
        self.conv = nn.Conv2d(1, c, 3, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(c, momentum=0.2)
        self.fc = nn.Linear(c * 6 * 6, hidden)
        self.bn1d = nn.BatchNorm1d(hidden, affine=False)
        self.head = nn.Linear(hidden, hp["classes"])

    def forward(self, batch):
        h = F.max_pool2d(F.relu(self.bn(self.conv(batch["image"]))), 2)
        h = F.relu(self.bn1d(self.fc(torch.flatten(h, 1))))
        return F.cross_entropy(self.head(h), batch["label"].long())


class BasicBlock(nn.Module):
    """torchvision.models.resnet.BasicBlock (torchvision is not installed
    here; this is its structure and names)."""

    def __init__(self, in_planes, planes, stride=1):
        super().__init__()
        self.conv1 = nn.Conv2d(in_planes, planes, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.downsample = None
        if stride != 1 or in_planes != planes:
            self.downsample = nn.Sequential(
                nn.Conv2d(in_planes, planes, 1, stride=stride, bias=False),
                nn.BatchNorm2d(planes))

    def forward(self, x):
        # In-place ReLUs, as torchvision's (what autograd saves depends on it).
        shortcut = x if self.downsample is None else self.downsample(x)
        h = F.relu(self.bn1(self.conv1(x)), inplace=True)
        return F.relu(self.bn2(self.conv2(h)) + shortcut, inplace=True)


class ResNet18(nn.Module):
    """examples/resnet18.mn: torchvision's resnet18, with a 3x3 stem and no
    max pool when cifar_stem."""

    def __init__(self, hp):
        super().__init__()
        w, cifar = hp["width"], hp["cifar_stem"]
        kernel = 3 if cifar else 7
        self.cifar = cifar
        self.conv1 = nn.Conv2d(3, w, kernel, stride=1 if cifar else 2, padding=kernel // 2,
                               bias=False)
        self.bn1 = nn.BatchNorm2d(w)
        stages = []
        for k, planes in enumerate([w, 2 * w, 4 * w, 8 * w]):
            first = w if k == 0 else planes // 2
            stride = 1 if k == 0 else 2
            stages.append(nn.Sequential(BasicBlock(first, planes, stride),
                                        BasicBlock(planes, planes)))
        self.layer1, self.layer2, self.layer3, self.layer4 = stages
        self.fc = nn.Linear(8 * w, hp["classes"])

    def forward(self, batch):
        h = F.relu(self.bn1(self.conv1(batch["image"])), inplace=True)
        if not self.cifar:
            h = F.max_pool2d(h, 3, stride=2, padding=1)
        h = self.layer4(self.layer3(self.layer2(self.layer1(h))))
        logits = self.fc(h.mean(dim=(2, 3)))
        return F.cross_entropy(logits, batch["label"].long())


class Tuples(nn.Module):
    """test/reference/models/tuples.mn: a sequence of blocks that take a
    mask besides the stream, and one of blocks that carry two values."""

    def __init__(self, hp):
        super().__init__()
        d = hp["dim"]
        self.blocks = nn.ModuleList(nn.ModuleDict({"fc": nn.Linear(d, d)})
                                    for _ in range(hp["layers"]))
        self.pairs = nn.ModuleList(nn.ModuleDict({"fa": nn.Linear(d, d), "fb": nn.Linear(d, d)})
                                   for _ in range(hp["layers"]))
        self.head = nn.Linear(d, hp["classes"])

    def forward(self, batch):
        x = batch["x"]
        keep = x > 0.0
        h = x
        for block in self.blocks:
            h = torch.where(keep, F.relu(block["fc"](h)), h)
        a, b = h, x
        for pair in self.pairs:
            a, b = pair["fa"](a) + b, torch.tanh(pair["fb"](b))
        return F.cross_entropy(self.head(a * b), batch["y"].long())


class UpNet(nn.Module):
    """test/reference/models/upsample.mn: a U-Net's up-path ops."""

    def __init__(self, hp):
        super().__init__()
        c = hp["channels"]
        self.down = nn.Conv2d(2, c, 3, stride=2, padding=1)
        self.up = nn.ConvTranspose2d(c, c, 3, stride=2, padding=1, output_padding=1)
        self.mix = nn.Conv2d(4 * c, c, 3, padding=1)
        self.head = nn.Linear(c, hp["classes"])

    def forward(self, batch):
        d = F.relu(self.down(batch["image"]))
        h = torch.cat([self.up(d),
                       F.interpolate(d, scale_factor=2, mode="nearest"),
                       F.interpolate(d, scale_factor=2, mode="bilinear", align_corners=False),
                       F.interpolate(d, scale_factor=2, mode="bilinear", align_corners=True)],
                      dim=1)
        logits = self.head(F.relu(self.mix(h)).mean(dim=(2, 3)))
        return F.cross_entropy(logits, batch["label"].long())


class Recurrent(nn.Module):
    """test/reference/models/recurrent.mn: a two-layer batch-first LSTM
    whose final state is carried to the next batch in buffers (rebound,
    not copied in place: autograd keeps the old state for the backward),
    then a bidirectional time-major GRU from zeros."""

    def __init__(self, hp):
        super().__init__()
        b, h, layers = hp["batch"], hp["hidden"], hp["layers"]
        self.embed = nn.Embedding(hp["vocab"], hp["dim"])
        self.lstm = nn.LSTM(hp["dim"], h, num_layers=layers, batch_first=True)
        self.gru = nn.GRU(h, h, bidirectional=True)
        self.head = nn.Linear(2 * h, hp["vocab"])
        self.register_buffer("h_state", torch.zeros(layers, b, h))
        self.register_buffer("c_state", torch.zeros(layers, b, h))

    def forward(self, batch):
        y, (h, c) = self.lstm(self.embed(batch["ids"].long()), (self.h_state, self.c_state))
        if self.training:
            self.h_state = h.detach()
            self.c_state = c.detach()
        h0 = torch.zeros(2, y.shape[0], y.shape[2], dtype=y.dtype)
        z, _ = self.gru(y.transpose(0, 1), h0)
        logits = self.head(z.transpose(0, 1))
        return F.cross_entropy(logits.flatten(0, 1), batch["next"].long().flatten())


class LSTMLanguageModel(nn.Module):
    """examples/lstm.mn: word_language_model's RNNModel (LSTM), its state
    carried across batches as buffers (repackage_hidden)."""

    def __init__(self, hp):
        super().__init__()
        b, h, layers = hp["batch"], hp["hidden"], hp["layers"]
        self.drop = nn.Dropout(hp["drop"])
        self.encoder = nn.Embedding(hp["vocab"], hp["dim"])
        self.rnn = nn.LSTM(hp["dim"], h, num_layers=layers, batch_first=True,
                           dropout=hp["drop"])
        self.decoder = nn.Linear(h, hp["vocab"])
        self.register_buffer("h_state", torch.zeros(layers, b, h))
        self.register_buffer("c_state", torch.zeros(layers, b, h))

    def forward(self, batch):
        x = self.drop(self.encoder(batch["tokens"].long()))
        y, (h, c) = self.rnn(x, (self.h_state, self.c_state))
        if self.training:
            self.h_state = h.detach()
            self.c_state = c.detach()
        logits = self.decoder(self.drop(y))
        return F.cross_entropy(logits.flatten(0, 1), batch["next"].long().flatten())


MODELS = {"LSTMLanguageModel": LSTMLanguageModel, "Recurrent": Recurrent, "MLP": MLP, "BatchNormNet": BatchNormNet, "ResNet18": ResNet18,
          "UpNet": UpNet,
          "Tuples": Tuples, "CNN": CNN, "GPT": GPT, "DeepMLP": DeepMLP,
          "SoftplusMLP": SoftplusMLP, "LogSumExpMLP": LogSumExpMLP,
          "PadMLP": PadMLP, "MaskMLP": MaskMLP,
          "Llama": Llama, "GPT2": GPT, "ClassifierLoss": ClassifierLoss}
