// The models of an eval job: each -m argument (a model folder or prefix, an external endpoint's
// base URL, or "" for the embedded default model) with the name its trials' folders carry.
//
//   -m DIR | PREFIX            a model served by the embedded engine; label: the folder's name
//   -m http(s)://HOST/v1       an external endpoint, its model --endpoint-model's (or the first
//   -m http(s)://HOST/v1#NAME  it lists), or NAME; label: HOST[-PORT] and the path, "-NAME"
//
// Labels keep [A-Za-z0-9._-] and turn anything else into '-'; a label that two arguments share
// gets "-2", "-3", ... on the later ones. In a job of several models the model agents' trial
// folders are "<task>__<agent>@<label>__<attempt>".
//
// Pure values and functions; thread-safe.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace flotilla::eval {

struct JobModel {
  std::string arg;             // as given to -m
  std::string prefix;          // what the worker serves (-m without "#NAME")
  std::string endpoint_model;  // an endpoint's model name; "" for the first it lists
  std::string label;
};

// InvalidArgument naming the argument: an empty "#NAME", the same -m given twice.
absl::StatusOr<std::vector<JobModel>> ParseJobModels(const std::vector<std::string>& args,
                                                     const std::string& endpoint_model);

}  // namespace flotilla::eval
