"""A transformers model with a DynamicCache behind kvconform's engine protocol (python/README.md)."""
import torch
from transformers import AutoConfig, AutoModelForCausalLM, DynamicCache

import kvconform


class HFEngine(kvconform.Engine):
    name = "hf-dynamic"
    operations = ("sequences",)

    def load(self, model_dir, options, mutant, max_tokens, sequences):
        config = kvconform.mutate_hf_config(AutoConfig.from_pretrained(model_dir), mutant)
        self.model = AutoModelForCausalLM.from_pretrained(model_dir, config=config).eval()
        self.sequences = sequences
        self.reset()
        return config.vocab_size

    def reset(self):
        self.caches = [DynamicCache(config=self.model.config) for _ in range(self.sequences)]

    def extend(self, seq, tokens):
        with torch.no_grad():
            logits = self.model(torch.tensor([tokens]), past_key_values=self.caches[seq], use_cache=True).logits
        return logits[0].float().numpy().astype("<f4").tobytes()


if __name__ == "__main__":
    kvconform.serve_engine(HFEngine())
