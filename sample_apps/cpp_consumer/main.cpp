// Runs a relay2cmake package through its C++ wrapper:
//   cpp_consumer IN_DIR OUT_DIR [BENCH_RUNS]
// reads IN_DIR/input_<i>.bin (raw bytes, model order), writes OUT_DIR/output_<i>.bin, and
// with BENCH_RUNS prints the median latency. The prefix comes from the build (MODEL_PREFIX)
// so this one program serves any package; an application for one model would use the
// named, typed members instead, e.g.
//   mymodel::Model model;
//   mymodel::OutputVectors out = model.run({image});   // Inputs{Span<const float> image}
//   float first = out.probabilities[0];
#include <algorithm>
#include <chrono>
#include <fstream>
#include <iostream>
#include <iterator>
#include <string>
#include <vector>

#define STR_(x) #x
#define STR(x) STR_(x)
#define CAT_(a, b) a##b
#define CAT(a, b) CAT_(a, b)
#define API(name) CAT(MODEL_PREFIX, CAT(_, name))
#include STR(MODEL_PREFIX/MODEL_PREFIX.hpp)

namespace model = MODEL_PREFIX;

int main(int argc, char** argv) {
  if (argc < 3) {
    std::cerr << "usage: " << argv[0] << " IN_DIR OUT_DIR [BENCH_RUNS]\n";
    return 2;
  }
  const int runs = argc > 3 ? std::stoi(argv[3]) : 0;
  try {
    model::Model session;  // RAII: the context is released at scope exit
    std::vector<std::vector<char>> inputs, outputs;
    std::vector<const void*> in;
    std::vector<void*> out;
    std::vector<std::size_t> in_bytes, out_bytes;
    for (std::size_t i = 0; API(input_info)(i) != nullptr; ++i) {
      std::ifstream file(std::string(argv[1]) + "/input_" + std::to_string(i) + ".bin", std::ios::binary);
      inputs.emplace_back(std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>());
    }
    for (std::size_t i = 0; API(output_info)(i) != nullptr; ++i) {
      outputs.emplace_back(API(output_info)(i)->num_bytes);
    }
    for (auto& v : inputs) in.push_back(v.data()), in_bytes.push_back(v.size());
    for (auto& v : outputs) out.push_back(v.data()), out_bytes.push_back(v.size());

    auto run = [&] {
      auto status = API(run_buffers)(session.get(), in.data(), in_bytes.data(), in.size(), out.data(),
                                     out_bytes.data(), out.size());
      if (status != 0) throw model::Error(status, API(last_error)(session.get()));
    };
    run();
    for (std::size_t i = 0; i < outputs.size(); ++i) {
      // A bounded output (NonZero, Unique, ...) fills only the start of its buffer.
      const auto* info = API(output_info)(i);
      std::size_t bytes = API(output_num_bytes)(session.get(), i);
      std::ofstream file(std::string(argv[2]) + "/output_" + std::to_string(i) + ".bin", std::ios::binary);
      file.write(outputs[i].data(), static_cast<std::streamsize>(bytes));
      std::cout << "output " << i << " '" << info->name << "': " << bytes << " bytes\n";
    }
    if (runs > 0) {
      std::vector<double> times;
      for (int r = 0; r < runs; ++r) {
        auto start = std::chrono::steady_clock::now();
        run();
        times.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
      }
      std::sort(times.begin(), times.end());
      std::cout << "median latency " << times[times.size() / 2] << " ms over " << runs << " runs\n";
    }
    return 0;
  } catch (const model::Error& error) {
    std::cerr << error.what() << " (status " << static_cast<int>(error.status()) << ")\n";
    return 1;
  }
}
