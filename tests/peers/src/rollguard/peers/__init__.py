"""rollguard's test peers and harness: the real systems rollguard talks to (Kafka, Kafka Connect,
a Kubernetes control plane, Prometheus) run as local processes, and simulated servers that speak
their protocols for what the real ones cannot be made to show on demand, so that tests,
benchmarks and the demo run the product's own code paths.

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
- `rollguard.peers.served`: an ASGI app served by uvicorn in a thread (the Connect and Kubernetes
  API peers, a test's HTTPS peer).
- `rollguard.peers.realkafka`, `.realconnect`, `.realprometheus`: a real Kafka (KRaft nodes from
  Kafka's own jars), Kafka Connect and Prometheus as local processes; `rollguard.peers.realcluster`:
  a real cluster with an agent beside each node; `rollguard.peers.realclients`: the tests' own
  ISR sampler and canary.
- `rollguard.peers.spawn`: the one registry of the processes the tests start (killed at exit),
  their start with their output in a log, their stop; `rollguard.peers.processes`: the one port
  helper (`free_port`), the start-up slots, the Java test broker (Kafka's MBeans over remote
  JMX), the agent as a process, a PKI.
- `rollguard.peers.control`: the one control server playing the hosts' service manager (restart,
  health, install); `rollguard.peers.rollcluster`: the protocol of the cluster a roll test drives;
  `rollguard.peers.commandline`: the one builder of `rollguard roll`/`plan` command lines.
- `rollguard.peers.harness` (+ `harness_pods`): the one roll harness: whatever cluster a test
  rolls (the simulator in process, a cluster of processes on hosts, pods on Kubernetes), the same
  `roll`/`plan`/`start` and one `Done` (exit code, output, events, journal), and the cluster's own
  record of its restarts.
- `rollguard.peers.cluster`: a simulated cluster of real processes (the end-to-end tests');
  `rollguard.peers.sim`: the roll on a virtual clock; `rollguard.peers.herd`: many clients
  against one server.
"""
