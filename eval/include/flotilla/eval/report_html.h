// The report.html of an eval job: one self-contained page (style inline, no script, nothing
// fetched from anywhere) rendered from the job's summary (job_summary.h): the job's figures,
// a table per agent, the task x agent matrix of pass rates, and every trial with its reward,
// status, error type, duration, tokens and, where given, its transcript.
//
// Pure functions; thread-safe.
#pragma once

#include <map>
#include <string>

#include "flotilla/proto/trajectory.pb.h"
#include "nlohmann/json.hpp"

namespace flotilla::eval {

// `transcripts`: trajectory id -> its transcript (TranscriptText); trials without one show none.
std::string RenderJobReport(const std::string& job_name, const nlohmann::json& summary,
                            const std::map<std::string, std::string>& transcripts);

// A trajectory as readable text: one "[role] text" block per turn (tool calls as
// "-> name(arguments)"), segments separated by their reason.
std::string TranscriptText(const v1::Trajectory& trajectory);

// `text` with & < > " ' escaped for HTML.
std::string HtmlEscape(const std::string& text);

}  // namespace flotilla::eval
