#!/usr/bin/env python3
"""Qwen2AudioForConditionalGeneration leaves a tied head untied from transformers 5.13.1 on: with
tie_word_embeddings true (outer config and text_config), 4.56.2 and 4.57.6 tie lm_head to the input
embeddings (the class held a whole Qwen2ForCausalLM, whose _tied_weights_keys it took over), while 5.13.1
to 5.25.0's class (model.language_model plus its own lm_head) declares no _tied_weights_keys: the head is
its own parameter, and from_pretrained reports lm_head.weight MISSING and initialises it at random.

    golden/.venv-5.25.0/bin/python engines/transformers/repro/qwen2_audio_tied_head_untied.py

Other wrappers of the same shape (Mistral3ForConditionalGeneration, Cohere2VisionForConditionalGeneration,
Qwen3ASRForConditionalGeneration, ...) declare {"lm_head.weight": "model.language_model.embed_tokens.weight"}
and tie. Released Qwen2-Audio checkpoints are untied, so they are not affected; the registry refuses a
tied qwen2_audio config (harness/src/engine/model.cpp kWrappers).
Exit 1 when the head is left untied (reproduces), 0 when it is tied.
"""
import sys

import transformers

text = {"model_type": "qwen2", "vocab_size": 64, "hidden_size": 16, "intermediate_size": 32, "num_hidden_layers": 1,
        "num_attention_heads": 2, "num_key_value_heads": 1, "tie_word_embeddings": True}
audio = {"model_type": "qwen2_audio_encoder", "d_model": 16, "encoder_layers": 1, "encoder_attention_heads": 2,
         "encoder_ffn_dim": 32, "num_mel_bins": 8, "max_source_positions": 8}
config = transformers.Qwen2AudioConfig(text_config=text, audio_config=audio, audio_token_index=63, tie_word_embeddings=True)
model = transformers.Qwen2AudioForConditionalGeneration(config)
head = model.get_output_embeddings().weight
tied = head.data_ptr() == model.get_input_embeddings().weight.data_ptr()
print(f"transformers {transformers.__version__}: tie_word_embeddings {config.tie_word_embeddings}, "
      f"_tied_weights_keys {getattr(model, '_tied_weights_keys', None)}, lm_head tied to the embeddings: {tied}")
sys.exit(0 if tied else 1)
