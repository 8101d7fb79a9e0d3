// Option registrations the commands share (CLI11): an option whose --help shows its default,
// one that takes one of a few words, and the --backend/--transport pair of the MPI commands.
#pragma once

#include <CLI/CLI.hpp>
#include <map>
#include <string>
#include <vector>

#include "runtime/kinds.hpp"

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

// `name` takes one of the names of enum E (common/enum_names.hpp), parsed here into `value`:
// the setting is an enum from the command line on; --help shows its default's name.
template <class E>
CLI::Option* add_enum_choice(CLI::App& app, const std::string& name, E& value,
                             const std::string& help) {
  std::map<std::string, E> names;
  const auto table = enum_names(E{});
  for (std::size_t i = 0; i < table.names.size(); ++i)
    names.emplace(std::string(table.names[i]), static_cast<E>(i));
  return app.add_option(name, value, help)
      ->transform(CLI::CheckedTransformer(names))
      ->default_str(std::string(name_of(value)));
}

// --backend cpu|cuda and --transport mpi|nccl ("" when not given: transport_of decides).
inline void add_backend_options(CLI::App& app, BackendKind& backend, std::string& transport) {
  add_enum_choice(app, "--backend", backend, "cpu or cuda");
  app.add_option("--transport", transport, "mpi or nccl (default: mpi for cpu, nccl for cuda)")
      ->check(CLI::IsMember({"mpi", "nccl"}));
}
// The transport of --transport TEXT (checked by add_backend_options), or the backend's default.
inline TransportKind transport_of(const std::string& text, BackendKind backend) {
  return text.empty() ? default_transport(backend) : enum_of<TransportKind>(text).value();
}

}  // namespace bb
