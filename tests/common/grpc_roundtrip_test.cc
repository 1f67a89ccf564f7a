// A real gRPC round trip over loopback (port 0) through the NodeAgent contract: a unary call
// and a server stream, checking the generated stubs and the wire.
#include <grpcpp/grpcpp.h>

#include "flotilla/proto/sandbox.grpc.pb.h"
#include "gtest/gtest.h"

namespace flotilla {
namespace {

class EchoAgent final : public v1::NodeAgent::Service {
 public:
  grpc::Status Usage(grpc::ServerContext*, const v1::Empty*, v1::NodeUsage* out) override {
    out->set_memory_capacity(24ull << 30);
    out->set_slots_capacity(2500);
    out->add_partitions()->set_cpus("0-1");
    return grpc::Status::OK;
  }
  grpc::Status Exec(grpc::ServerContext*, const v1::ExecRequest* req,
                    grpc::ServerWriter<v1::ExecChunk>* writer) override {
    if (req->argv().empty()) return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "argv is empty");
    for (const auto& arg : req->argv()) {
      v1::ExecChunk chunk;
      chunk.set_stdout(arg);
      writer->Write(chunk);
    }
    v1::ExecChunk last;
    last.mutable_exit()->set_exit_code(req->argv_size());
    writer->Write(last);
    return grpc::Status::OK;
  }
};

TEST(GrpcRoundTripTest, UnaryAndServerStreamOverLoopback) {
  EchoAgent service;
  int port = 0;
  grpc::ServerBuilder builder;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  ASSERT_NE(server, nullptr);
  ASSERT_GT(port, 0);

  auto channel = grpc::CreateChannel("127.0.0.1:" + std::to_string(port), grpc::InsecureChannelCredentials());
  auto stub = v1::NodeAgent::NewStub(channel);

  grpc::ClientContext uctx;
  v1::NodeUsage usage;
  ASSERT_TRUE(stub->Usage(&uctx, v1::Empty(), &usage).ok());
  EXPECT_EQ(usage.memory_capacity(), 24ull << 30);
  EXPECT_EQ(usage.slots_capacity(), 2500u);
  ASSERT_EQ(usage.partitions_size(), 1);
  EXPECT_EQ(usage.partitions(0).cpus(), "0-1");

  grpc::ClientContext sctx;
  v1::ExecRequest req;
  req.add_argv("echo");
  req.add_argv("hi");
  auto reader = stub->Exec(&sctx, req);
  std::vector<std::string> out;
  v1::ExecChunk chunk;
  int exit_code = -100;
  while (reader->Read(&chunk)) {
    if (chunk.has_exit()) exit_code = chunk.exit().exit_code();
    else out.push_back(chunk.stdout());
  }
  ASSERT_TRUE(reader->Finish().ok());
  EXPECT_EQ(out, (std::vector<std::string>{"echo", "hi"}));
  EXPECT_EQ(exit_code, 2);

  grpc::ClientContext ectx;
  auto bad = stub->Exec(&ectx, v1::ExecRequest());
  while (bad->Read(&chunk)) {}
  grpc::Status st = bad->Finish();
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(st.error_message(), "argv is empty");
  server->Shutdown();
}

}  // namespace
}  // namespace flotilla
