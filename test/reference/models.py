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


class ClassifierLossBias(nn.Module):
    """test/reference/models/classifier-loss-bias.mn: a head tied to the
    embedding table plus a bias of its own (BERT's decoder), with the same
    loss as ClassifierLoss."""

    def __init__(self, hp):
        super().__init__()
        self.wte = nn.Parameter(torch.empty(hp["vocab"], hp["dim"]))
        self.bias = nn.Parameter(torch.empty(hp["vocab"]))

    def forward(self, batch):
        logits = torch.tanh(self.wte[batch["tokens"].long()]) @ self.wte.T + self.bias
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
        self.mix = nn.Conv2d(5 * c, c, 3, padding=1)
        self.head = nn.Linear(c, hp["classes"])

    def forward(self, batch):
        d = F.relu(self.down(batch["image"]))
        h = torch.cat([self.up(d),
                       F.interpolate(d, scale_factor=2, mode="nearest"),
                       F.interpolate(d, scale_factor=2, mode="bilinear", align_corners=False),
                       F.interpolate(d, scale_factor=2, mode="bilinear", align_corners=True),
                       F.interpolate(F.interpolate(d, scale_factor=1.5, mode="nearest"),
                                     size=(8, 8), mode="bilinear", align_corners=False)],
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


class BertForMaskedLM(nn.Module):
    """examples/bert.mn: Hugging Face's BertForMaskedLM structure and names
    (but `encoder.layers`), post-norm blocks, exact GELU, a padding mask on
    the keys, the decoder tied to the word embeddings with its own bias;
    attention written out (1.13 has no fused one)."""

    def __init__(self, hp):
        super().__init__()
        d, v, eps = hp["dim"], hp["vocab"], hp["eps"]
        self.heads, self.pad_id, self.drop = hp["heads"], hp["pad_id"], hp["drop"]
        self.embeddings = nn.ModuleDict({
            "word_embeddings": nn.Embedding(v, d),
            "position_embeddings": nn.Embedding(hp["context"], d),
            "LayerNorm": nn.LayerNorm(d, eps=eps)})

        def output(fan_in):
            return nn.ModuleDict({"dense": nn.Linear(fan_in, d), "LayerNorm": nn.LayerNorm(d, eps=eps)})

        self.encoder = nn.ModuleDict({"layers": nn.ModuleList(nn.ModuleDict({
            "attention": nn.ModuleDict({
                "self": nn.ModuleDict({"query": nn.Linear(d, d), "key": nn.Linear(d, d),
                                       "value": nn.Linear(d, d)}),
                "output": output(d)}),
            "intermediate": nn.ModuleDict({"dense": nn.Linear(d, hp["hidden"])}),
            "output": output(hp["hidden"])}) for _ in range(hp["layers"]))})
        self.cls = nn.ModuleDict({"predictions": nn.ModuleDict({
            "transform": nn.ModuleDict({"dense": nn.Linear(d, d),
                                        "LayerNorm": nn.LayerNorm(d, eps=eps)})})})
        self.cls["predictions"].register_parameter("bias", nn.Parameter(torch.zeros(v)))

    def forward(self, batch):
        ids = batch["ids"].long()
        B, T = ids.shape
        emb = self.embeddings
        h = emb["word_embeddings"](ids) + emb["position_embeddings"].weight
        h = F.dropout(emb["LayerNorm"](h), self.drop, self.training)
        keep = (ids != self.pad_id).reshape(B, 1, 1, T)
        for layer in self.encoder["layers"]:
            att = layer["attention"]["self"]

            def heads(x):
                return x.reshape(B, T, self.heads, -1).permute(0, 2, 1, 3)
            q, k, v = heads(att["query"](h)), heads(att["key"](h)), heads(att["value"](h))
            scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
            p = torch.softmax(scores.masked_fill(~keep, float("-inf")), dim=-1)
            y = (F.dropout(p, self.drop, self.training) @ v).permute(0, 2, 1, 3).reshape(B, T, -1)
            out = layer["attention"]["output"]
            a = out["LayerNorm"](F.dropout(out["dense"](y), self.drop, self.training) + h)
            mid = F.gelu(layer["intermediate"]["dense"](a))
            out = layer["output"]
            h = out["LayerNorm"](F.dropout(out["dense"](mid), self.drop, self.training) + a)
        pred = self.cls["predictions"]
        t = pred["transform"]
        # In its parameters' type: a no-op unless under bf16 autocast, where
        # the layer norm computes in f32, as CUDA's autocast policy (and
        # Mnemo's amp) has it. PyTorch 1.13's CPU layer_norm refuses a bf16
        # input with f32 parameters.
        norm = t["LayerNorm"]
        x = norm(F.gelu(t["dense"](h)).to(norm.weight.dtype))
        logits = x @ emb["word_embeddings"].weight.T + pred.bias
        return F.cross_entropy(logits.flatten(0, 1), batch["labels"].long().flatten(),
                               ignore_index=-100)


class VisionTransformer(nn.Module):
    """examples/vit.mn: timm's VisionTransformer structure and names (a
    fused qkv projection, a class token, learned position embeddings,
    pre-norm blocks, exact GELU, LayerNorm eps 1e-6); attention written
    out, no dropout or drop_path (the test runs without them)."""

    def __init__(self, hp):
        super().__init__()
        d, p, c = hp["dim"], hp["patch"], hp["channels"]
        n = (hp["size"] // p) ** 2
        self.heads = hp["heads"]
        self.patch_embed = nn.ModuleDict({"proj": nn.Conv2d(c, d, p, stride=p)})
        self.cls_token = nn.Parameter(torch.zeros(1, 1, d))
        self.pos_embed = nn.Parameter(torch.zeros(1, n + 1, d))
        hidden = hp["mlp_ratio"] * d
        self.blocks = nn.ModuleList(nn.ModuleDict({
            "norm1": nn.LayerNorm(d, eps=1e-6),
            "attn": nn.ModuleDict({"qkv": nn.Linear(d, 3 * d), "proj": nn.Linear(d, d)}),
            "norm2": nn.LayerNorm(d, eps=1e-6),
            "mlp": nn.ModuleDict({"fc1": nn.Linear(d, hidden), "fc2": nn.Linear(hidden, d)}),
        }) for _ in range(hp["depth"]))
        self.norm = nn.LayerNorm(d, eps=1e-6)
        self.head = nn.Linear(d, hp["classes"])

    def forward(self, batch):
        image = batch["image"]
        B = image.shape[0]
        x = self.patch_embed["proj"](image).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls_token.expand(B, -1, -1), x], dim=1) + self.pos_embed
        for block in self.blocks:
            h = block["norm1"](x)
            T, D = h.shape[1], h.shape[2]
            qkv = block["attn"]["qkv"](h).reshape(B, T, 3, self.heads, D // self.heads)
            q, k, v = qkv.permute(2, 0, 3, 1, 4)
            p = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1)
            y = (p @ v).transpose(1, 2).reshape(B, T, D)
            x = x + block["attn"]["proj"](y)
            mlp = block["mlp"]
            x = x + mlp["fc2"](F.gelu(mlp["fc1"](block["norm2"](x))))
        logits = self.head(self.norm(x)[:, 0])
        return F.cross_entropy(logits, batch["label"].long(), label_smoothing=0.1)


class UNet(nn.Module):
    """examples/unet.mn: milesial/Pytorch-UNet's UNet (its module names),
    with `base` channels at the first level, transposed convolutions or
    bilinear upsampling (align_corners) on the way up."""

    def __init__(self, hp):
        super().__init__()
        c, b, bilinear = hp["channels"], hp["base"], hp["bilinear"]
        self.bilinear = bilinear

        def double(i, o, mid=None):
            mid = mid or o
            return nn.ModuleDict({"double_conv": nn.Sequential(
                nn.Conv2d(i, mid, 3, padding=1, bias=False), nn.BatchNorm2d(mid), nn.ReLU(),
                nn.Conv2d(mid, o, 3, padding=1, bias=False), nn.BatchNorm2d(o), nn.ReLU())})

        def down(i, o):
            return nn.ModuleDict({"maxpool_conv": nn.Sequential(nn.MaxPool2d(2), DoubleConv(double(i, o)))})

        def up(i, o):
            if bilinear:
                return nn.ModuleDict({"conv": double(i, o, i // 2)})
            return nn.ModuleDict({"up": nn.ConvTranspose2d(i, i // 2, 2, stride=2),
                                  "conv": double(i, o)})

        f = 2 if bilinear else 1
        self.inc = double(c, b)
        self.down1, self.down2 = down(b, 2 * b), down(2 * b, 4 * b)
        self.down3, self.down4 = down(4 * b, 8 * b), down(8 * b, 16 * b // f)
        self.up1, self.up2 = up(16 * b, 8 * b // f), up(8 * b, 4 * b // f)
        self.up3, self.up4 = up(4 * b, 2 * b // f), up(2 * b, b)
        self.outc = nn.Conv2d(b, hp["classes"], 1)

    def upward(self, block, x, skip):
        if self.bilinear:
            x = F.interpolate(x, scale_factor=2, mode="bilinear", align_corners=True)
        else:
            x = block["up"](x)
        dy, dx = skip.shape[2] - x.shape[2], skip.shape[3] - x.shape[3]
        x = F.pad(x, [dx // 2, dx - dx // 2, dy // 2, dy - dy // 2])
        return block["conv"]["double_conv"](torch.cat([skip, x], dim=1))

    def forward(self, batch):
        x1 = self.inc["double_conv"](batch["image"])
        x2 = self.down1["maxpool_conv"](x1)
        x3 = self.down2["maxpool_conv"](x2)
        x4 = self.down3["maxpool_conv"](x3)
        x = self.upward(self.up1, self.down4["maxpool_conv"](x4), x4)
        x = self.upward(self.up4, self.upward(self.up3, self.upward(self.up2, x, x3), x2), x1)
        return F.cross_entropy(self.outc(x), batch["mask"].long())


class DoubleConv(nn.Module):
    """A ModuleDict's double_conv, callable (examples/unet.mn's Down holds
    one in its nn.Sequential)."""

    def __init__(self, modules):
        super().__init__()
        self.double_conv = modules["double_conv"]

    def forward(self, x):
        return self.double_conv(x)


class Integers(nn.Module):
    """test/reference/models/integers.mn: torch.floor_divide (also by a
    negative divisor), torch.remainder and true division of int tensors."""

    def __init__(self, hp):
        super().__init__()
        self.embed = nn.Embedding(hp["vocab"], hp["dim"])
        self.buckets = nn.Embedding(hp["vocab"], hp["dim"])
        self.head = nn.Linear(hp["dim"] + 3, hp["classes"])

    def forward(self, batch):
        ids = batch["ids"].long()
        shifted = ids - 7
        up = torch.div(shifted, 3, rounding_mode="floor") + 3
        down = torch.div(shifted, -2, rounding_mode="floor") + 6
        h = self.embed(ids) + self.buckets(up) + self.buckets(down)
        real = h.dtype
        features = torch.cat([h, torch.remainder(shifted, 3).to(real).unsqueeze(-1),
                              torch.remainder(shifted, -4).to(real).unsqueeze(-1),
                              (shifted / 4).to(real).unsqueeze(-1)], dim=-1)
        return F.cross_entropy(self.head(features.mean(dim=1)), batch["y"].long())


MODELS = {"Integers": Integers, "UNet": UNet, "VisionTransformer": VisionTransformer, "BertForMaskedLM": BertForMaskedLM, "LSTMLanguageModel": LSTMLanguageModel, "Recurrent": Recurrent, "MLP": MLP, "BatchNormNet": BatchNormNet, "ResNet18": ResNet18,
          "UpNet": UpNet,
          "Tuples": Tuples, "CNN": CNN, "GPT": GPT, "DeepMLP": DeepMLP,
          "SoftplusMLP": SoftplusMLP, "LogSumExpMLP": LogSumExpMLP,
          "PadMLP": PadMLP, "MaskMLP": MaskMLP,
          "Llama": Llama, "GPT2": GPT, "ClassifierLoss": ClassifierLoss,
          "ClassifierLossBias": ClassifierLossBias}
