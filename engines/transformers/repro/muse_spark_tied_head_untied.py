#!/usr/bin/env python3
"""MuseSparkForConditionalGeneration leaves a tied head untied (transformers 5.24.0 and 5.25.0): with
tie_word_embeddings true (outer config and text_config), MuseGlimmerForConditionalGeneration, whose modular class
it extends, ties lm_head to the input embeddings ({"lm_head.weight": "model.language_model.embed_tokens.weight"}),
while modular_muse_spark.py sets `_tied_weights_keys = AttributeError()`: the generated class declares none, the
head is its own parameter, and from_pretrained reports lm_head.weight MISSING and initialises it at random.

    golden/.venv-5.25.0/bin/python engines/transformers/repro/muse_spark_tied_head_untied.py

MuseSparkTextConfig's default is untied, so an untied checkpoint is not affected; the registry refuses a tied
muse_spark config (harness/src/engine/model.cpp kWrappers), as it does qwen2_audio's.
Exit 1 when the head is left untied (reproduces), 0 when it is tied.
"""
import sys

import transformers

text = {"vocab_size": 64, "hidden_size": 16, "intermediate_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2,
        "num_key_value_heads": 1, "head_dim": 8, "num_local_experts": 2, "num_experts_per_tok": 1,
        "moe_intermediate_size": 8, "moe_hidden_size": 8, "tie_word_embeddings": True}
vision = {"hidden_size": 16, "intermediate_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2, "patch_size": 2,
          "pos_emb_height": 4, "pos_emb_width": 4, "merge_size": 1}
audio = {"patch_sizes": [2], "hidden_sizes": [8], "depths": [1], "num_hidden_layers": 1, "out_hidden_size": 16}
config = transformers.MuseSparkConfig(text_config=text, vision_config=vision, audio_config=audio, out_hidden_size=16,
                                      projector_hidden_size=32, image_token_id=60, video_token_id=61, audio_token_id=62,
                                      tie_word_embeddings=True)
model = transformers.MuseSparkForConditionalGeneration(config)
head = model.get_output_embeddings().weight
tied = head.data_ptr() == model.get_input_embeddings().weight.data_ptr()
print(f"transformers {transformers.__version__}: tie_word_embeddings {config.tie_word_embeddings}, "
      f"_tied_weights_keys {getattr(model, '_tied_weights_keys', None)}, lm_head tied to the embeddings: {tied}")
sys.exit(0 if tied else 1)
