"""rollguard's test peers: real servers that speak the protocols of the systems rollguard talks
to, so that tests, benchmarks and the demo run the product's own code paths.

- `rollguard.peers.kafka` (+ `kafka_model`): a Kafka-protocol responder built on kafka-python's
  own structures: Metadata, DescribeCluster, DescribeQuorum, DescribeConfigs,
  ListPartitionReassignments, ElectLeaders; brokers that restart fenced and rejoin their ISRs
  over time, internal topics, controller-only voters, racks.
- `rollguard.peers.realkube` (+ `realkube_*`): a real Kubernetes control plane (etcd,
  kube-apiserver, controller manager, scheduler, kwok as the kubelet of one node) as local
  processes, where the roller's Kubernetes tests run.
- `rollguard.peers.kube` (+ `kube_api`, `kube_objects`, `kube_model`, `kube_pods`): a fake
  Kubernetes API server, kept for what a real control plane cannot show on demand: pods stuck
  in CrashLoopBackOff, ImagePullBackOff or Unschedulable, and a StatefulSet of 1,000 pods. It
  serves what `rollguard roll` touches through lightkube, and only that (pods get/list/delete,
  StatefulSets get, ConfigMaps and Leases get/create/update with resourceVersion conflicts);
  anything else is answered 404/405/415/400 as an API server would.
- `rollguard.peers.connect`: Kafka Connect's REST API with its versions' semantics.
- `rollguard.peers.processes`: the Java test broker (Kafka's MBeans over remote JMX), the agent
  as a process, a PKI.
- `rollguard.peers.cluster`: a simulated cluster of real processes (the demo's and the
  end-to-end tests'); `rollguard.peers.sim`: the roll on a virtual clock; `rollguard.peers.herd`:
  many clients against one server.
"""
