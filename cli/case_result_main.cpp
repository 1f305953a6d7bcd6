// kvc-case-result FILE BATCH: one ctest case/<id> test (discover_cases.cmake.in). The batch test
// BATCH ran every case of its slice in one process (`kvconform run --case-results`), so LibTorch
// starts once per batch rather than once per case; this prints what the run printed for the case and
// exits as a single-case run would: 0 for OK or DEVIATION, 1 for FAIL, for SKIP (a case that checked
// nothing is not a pass) and for a case the batch never recorded. No LibTorch, no libraries.
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: kvc-case-result FILE BATCH\n";
    return 2;
  }
  std::ifstream in(argv[1]);
  if (!in) {
    std::cout << "no result recorded for this case: the batch test " << argv[2]
              << " did not reach it (it failed or crashed before; see that test's output)\n";
    return 1;
  }
  std::string status;
  std::getline(in, status);
  std::ostringstream rest;
  rest << in.rdbuf();
  std::cout << rest.str();
  if (status == "OK" || status == "DEVIATION") return 0;
  if (status == "SKIP") std::cout << "nothing was checked: the case was skipped (see its reason above)\n";
  else if (status != "FAIL") std::cout << "unreadable result file " << argv[1] << ": status '" << status << "'\n";
  return 1;
}
