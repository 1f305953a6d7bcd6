// kvc-oracle-engine: an engine-protocol worker (docs/engines.md) whose "engine" is the model oracle
// itself in float32, keeping every position (no eviction). It is the protocol in one file for engine
// authors, the engine suite's own positive control (it must pass every plan), and, with options, its
// negative controls: the adapter mutants (a wrong window) and worker faults (crash, hang, garbage,
// exit at a given step), which the suite must catch.
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "kvconform/engine/model.h"

using nlohmann::json;
using kvc::engine::Model;
using Oracle = kvc::engine::SequenceOracle<float>;

namespace {

bool read_exact(char* p, size_t n) {
  while (n) {
    const ssize_t r = read(0, p, n);
    if (r <= 0) return false;
    p += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

void send(const json& h, const std::string& payload = "") {
  const std::string s = h.dump();
  const uint32_t n = static_cast<uint32_t>(s.size());
  char len[4];
  for (int i = 0; i < 4; ++i) len[i] = static_cast<char>((n >> (8 * i)) & 0xFF);
  std::string msg(len, 4);
  msg += s + payload;
  const char* p = msg.data();
  size_t left = msg.size();
  while (left) {
    const ssize_t w = write(1, p, left);
    if (w <= 0) std::exit(0);
    p += w;
    left -= static_cast<size_t>(w);
  }
}

struct State {
  std::unique_ptr<Model> model;
  kvc::engine::OracleOptions options;
  std::map<int64_t, std::unique_ptr<Oracle>> seqs;
  std::string fault;  // "crash", "hang", "garbage", "exit"
  int64_t fault_step = -1;
  Oracle& seq(int64_t s) {
    auto& slot = seqs[s];
    if (!slot) slot = std::make_unique<Oracle>(*model, options);
    return *slot;
  }
};

}  // namespace

int main() {
  State st;
  for (;;) {
    char len[4];
    if (!read_exact(len, 4)) return 0;
    uint32_t n = 0;
    for (int i = 0; i < 4; ++i) n |= static_cast<uint32_t>(static_cast<uint8_t>(len[i])) << (8 * i);
    std::string header(n, '\0');
    if (!read_exact(header.data(), n)) return 0;
    const json h = json::parse(header, nullptr, false);
    const std::string op = h.is_object() ? h.value("op", "") : "";
    try {
      if (op == "hello") {
        send({{"status", "ok"}, {"name", "kvc-oracle-engine"}, {"version", "1"},
              {"description", "the model oracle in float32, every position kept"},
              {"operations", {"rollback", "reload", "sequences"}}});
        continue;
      }
      if (h.contains("step") && h["step"] == st.fault_step) {
        if (st.fault == "crash") std::raise(SIGSEGV);
        if (st.fault == "exit") std::exit(3);
        if (st.fault == "hang") pause();
        if (st.fault == "garbage") {
          std::fputs("a stray print on stdout", stdout);
          std::fflush(stdout);
          pause();
        }
      }
      if (op == "load") {
        st.model = std::make_unique<Model>(kvc::engine::load_model(h.at("model").get<std::string>()));
        st.seqs.clear();
        st.options = {};
        st.fault.clear();
        st.fault_step = -1;
        const json options = h.value("options", json::object());
        for (const auto& [key, value] : options.items()) {
          if (key == "fault") {
            const std::string f = value;  // "crash@3"
            st.fault = f.substr(0, f.find('@'));
            st.fault_step = std::stoll(f.substr(f.find('@') + 1));
          } else {
            throw std::invalid_argument("unknown option \"" + key + "\" (kvc-oracle-engine knows: fault)");
          }
        }
        const std::string mutant = h.value("mutant", "none");
        const auto& windows = st.model->config.windows;
        for (int64_t w : windows) {
          if (mutant == "none") st.options.windows.push_back(w);
          else if (mutant == "window+1") st.options.windows.push_back(w > 0 ? w + 1 : 0);
          else if (mutant == "window-1") st.options.windows.push_back(w > 1 ? w - 1 : w);
          else if (mutant == "full") st.options.windows.push_back(0);
          else throw std::invalid_argument("unknown mutant \"" + mutant + "\"");
        }
        send({{"status", "ok"}, {"vocab", st.model->config.vocab}});
      } else if (op == "extend") {
        const std::vector<int32_t> tokens = h.at("tokens").get<std::vector<int32_t>>();
        const std::vector<double> logits = st.seq(h.at("seq")).extend(tokens);
        std::string payload(logits.size() * 4, '\0');
        for (size_t i = 0; i < logits.size(); ++i) {
          const float f = static_cast<float>(logits[i]);
          std::memcpy(payload.data() + 4 * i, &f, 4);
        }
        send({{"status", "ok"},
              {"buffers", {{{"name", "logits"}, {"dtype", "float32"}, {"shape", {tokens.size(), st.model->config.vocab}}, {"nbytes", payload.size()}}}}},
             payload);
      } else if (op == "rollback") {
        st.seq(h.at("seq")).truncate(h.at("n"));
        send({{"status", "ok"}});
      } else if (op == "reload") {
        Oracle copy = st.seq(h.at("seq"));
        st.seqs.erase(h.at("seq").get<int64_t>());
        st.seqs[h.at("seq")] = std::make_unique<Oracle>(copy);
        send({{"status", "ok"}});
      } else if (op == "reset") {
        st.seqs.clear();
        send({{"status", "ok"}});
      } else {
        send({{"status", "error"}, {"error", "unknown op \"" + op + "\""}});
      }
    } catch (const std::exception& e) {
      send({{"status", "error"}, {"error", e.what()}});
    }
  }
}
