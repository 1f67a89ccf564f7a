"""BridgeClient: the trainer's side of the TrainerBridge gRPC service (common/proto/trainer.proto).

The trainer keeps one NextBatch stream open for its whole life: the bridge treats the stream's
end as the trainer going away (it suspends rollouts and offloads their state). Each batch must
be acknowledged with report(step) before the bridge sends the next (prefetch 1), so staleness
is judged against the weights the trainer really holds.
"""
import grpc

from .proto import pb, pb_grpc


class BridgeClient:
    def __init__(self, address, trainer_id="trainer", timeout_s=120.0):
        self.address = address
        self.trainer_id = trainer_id
        self.channel = grpc.insecure_channel(address, options=[
            ("grpc.max_receive_message_length", 512 << 20),
            ("grpc.max_send_message_length", 64 << 20)])
        grpc.channel_ready_future(self.channel).result(timeout=timeout_s)
        self.stub = pb_grpc.TrainerBridgeStub(self.channel)
        self._stream = None

    def status(self):
        return self.stub.Status(pb.StatusRequest())

    def warm_start(self, count, seed=0, dataset=""):
        return self.stub.WarmStart(pb.WarmStartRequest(count=count, seed=seed, dataset=dataset)).examples

    def batches(self, trainer_version=0, batch_size=0, prefetch=1):
        """Opens the long-lived NextBatch stream; yields Batch messages."""
        self._stream = self.stub.NextBatch(pb.NextBatchRequest(
            trainer_id=self.trainer_id, batch_size=batch_size, trainer_version=trainer_version,
            prefetch=prefetch))
        return self._stream

    def publish(self, version, path, model=""):
        return self.stub.PublishWeights(pb.PublishWeightsRequest(version=version, safetensors_path=path, model=model))

    def report(self, step, **metrics):
        self.stub.Report(pb.ReportRequest(step=step, metrics={k: float(v) for k, v in metrics.items()}))

    def reconfigure(self, datasets=(), active_teachers=None):
        req = pb.ReconfigureRequest()
        for name, weight, max_in_flight in datasets:
            req.datasets.add(name=name, weight=weight, max_in_flight=max_in_flight)
        if active_teachers is not None:
            req.set_teachers = True
            req.active_teachers.extend(active_teachers)
        return self.stub.Reconfigure(req)

    def close(self):
        if self._stream is not None:
            self._stream.cancel()
        self.channel.close()
