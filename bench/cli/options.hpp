// Option registrations the commands share (CLI11): an option whose --help shows its default,
// one that takes one of a few words, and the --backend/--transport pair of the MPI commands.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

namespace bb {

// An option whose --help shows its default.
template <class T>
CLI::Option* add_with_default(CLI::App& app, const std::string& name, T& value,
                              const std::string& help) {
  return app.add_option(name, value, help)->capture_default_str();
}

// `name` takes one of `choices` (anything else is a parse error); --help shows its default.
inline CLI::Option* add_choice(CLI::App& app, const std::string& name, std::string& value,
                               const std::string& help, std::vector<std::string> choices) {
  return add_with_default(app, name, value, help)->check(CLI::IsMember(std::move(choices)));
}

// --backend cpu|cuda and --transport mpi|nccl (empty when not given: the backend decides).
inline void add_backend_options(CLI::App& app, std::string& backend, std::string& transport) {
  add_choice(app, "--backend", backend, "cpu or cuda", {"cpu", "cuda"});
  app.add_option("--transport", transport, "mpi or nccl (default: mpi for cpu, nccl for cuda)")
      ->check(CLI::IsMember({"mpi", "nccl"}));
}

}  // namespace bb
