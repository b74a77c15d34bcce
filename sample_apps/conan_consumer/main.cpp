// The demo model through its C++ wrapper, with the named and typed members.
#include <digits/digits.hpp>

#include <algorithm>
#include <iostream>
#include <iterator>
#include <vector>

int main() {
  std::vector<float> image(digits::input::image::num_elements, 0.0f);
  for (int col = 6; col < 22; ++col) image[5 * 28 + col] = 1.0f;           // a crude "7"
  for (int row = 6; row < 24; ++row) image[row * 28 + (21 - (row - 6) * 2 / 3)] = 1.0f;
  try {
    digits::Model model;
    digits::OutputVectors out = model.run({image});
    auto best = std::max_element(out.probabilities.begin(), out.probabilities.end());
    std::cout << "predicted class " << std::distance(out.probabilities.begin(), best) << " (p=" << *best << ")\n";
    std::vector<float> too_short(3);
    try {
      model.run({too_short});
    } catch (const digits::Error& error) {
      std::cout << "a wrong-sized input is reported: " << error.what() << "\n";
    }
  } catch (const digits::Error& error) {
    std::cerr << error.what() << "\n";
    return 1;
  }
  return 0;
}
