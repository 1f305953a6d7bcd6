"""Input generator "kvc-mix64-v1" for kvconform scenarios (pure Python, no dependencies).

The C++ harness implements the same generator bit for bit; cases/README.md holds test vectors.

All arithmetic is on unsigned 64-bit integers (mod 2**64):

    mix64(z): z += 0x9E3779B97F4A7C15
              z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
              z = (z ^ (z >> 27)) * 0x94D049BB133111EB
              return z ^ (z >> 31)

    element(seed, tensor_id, layer, b, h, t, d):
        x = mix64(seed)
        for v in (tensor_id, layer, b, h, t, d): x = mix64(x ^ v)
        return (((x >> 32) % 257) - 128) / 128.0

tensor_id: q=1, k=2, v=3; layer: index in layer_types; t: absolute token index in the whole
sequence (tokens fed before it), so a token gets the same values whatever the step split.
Every value is k/128 with |k| <= 128: exact in float16, bfloat16, float32 and float64.
"""

GENERATOR_NAME = "kvc-mix64-v1"
MASK64 = (1 << 64) - 1
TENSOR_IDS = {"q": 1, "k": 2, "v": 3}


def mix64(z: int) -> int:
    z = (z + 0x9E3779B97F4A7C15) & MASK64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
    return z ^ (z >> 31)


def element(seed: int, tensor_id: int, layer: int, b: int, h: int, t: int, d: int) -> float:
    x = mix64(seed & MASK64)
    for v in (tensor_id, layer, b, h, t, d):
        x = mix64(x ^ (v & MASK64))
    return (((x >> 32) % 257) - 128) / 128.0


def element_numerator(seed: int, tensor_id: int, layer: int, b: int, h: int, t: int, d: int) -> int:
    """The integer k of element() == k / 128 (handy for test vectors)."""
    x = mix64(seed & MASK64)
    for v in (tensor_id, layer, b, h, t, d):
        x = mix64(x ^ (v & MASK64))
    return ((x >> 32) % 257) - 128


def step_block(seed: int, tensor: str, layer: int, batch: int, heads: int, seen: int, tokens: int, head_dim: int):
    """Flat row-major list over [batch, heads, tokens, head_dim] for the tokens seen .. seen+tokens-1."""
    tid = TENSOR_IDS[tensor]
    out = []
    for b in range(batch):
        for h in range(heads):
            for i in range(tokens):
                for d in range(head_dim):
                    out.append(element(seed, tid, layer, b, h, seen + i, d))
    return out


if __name__ == "__main__":
    import sys

    seed = int(sys.argv[1]) if len(sys.argv) > 1 else 1
    print("seed=%d tensor=k layer=0 b=0 h=0 d=0, t=0..7:" % seed)
    print([element_numerator(seed, 2, 0, 0, 0, t, 0) for t in range(8)])
