// Generated from rendered manifests: each object is checked against the API's types.
import type * as apps_v1 from "kubernetes-types/apps/v1";
import type * as batch_v1 from "kubernetes-types/batch/v1";
import type * as core_v1 from "kubernetes-types/core/v1";
import type * as networking_v1 from "kubernetes-types/networking/v1";
import type * as policy_v1 from "kubernetes-types/policy/v1";
export const o0: core_v1.ServiceAccount = {
 apiVersion: "v1",
 automountServiceAccountToken: false,
 kind: "ServiceAccount",
 metadata: {
  labels: {
   "app.kubernetes.io/name": "herd",
   "herd.dev/job": "fmnist"
  },
  name: "herd"
 }
};
export const o1: core_v1.ConfigMap = {
 apiVersion: "v1",
 data: {
  "job.yaml": "# A short job: 2 workers on 6400 images (50 iterations), a shard, a checkpoint every 20.\nname: fmnist\nmode: ps_sync\nworkers: 2\nservers: 1\nseed: 7\noptimizer: {name: sgd, learning_rate: 0.1}\ntraining: {model: mlp, epochs: 1, batch_size: 64, train_samples: 6400}\ncheckpoint:\n  dir: /var/lib/herd/checkpoints/fmnist\n  every: 20\n  keep_last: 2\n  timeout: 1m\n"
 },
 kind: "ConfigMap",
 metadata: {
  labels: {
   "app.kubernetes.io/name": "herd",
   "herd.dev/job": "fmnist"
  },
  name: "herd-job-4b6479m2ck"
 }
};
export const o2: core_v1.Secret = {
 apiVersion: "v1",
 data: {
  token: "bG9jYWwtdGVzdC10b2tlbi1ub3Qtc2VjcmV0"
 },
 kind: "Secret",
 metadata: {
  labels: {
   "app.kubernetes.io/name": "herd",
   "herd.dev/job": "fmnist"
  },
  name: "herd-token-hgt852cdmt"
 },
 type: "Opaque"
};
export const o3: core_v1.Service = {
 apiVersion: "v1",
 kind: "Service",
 metadata: {
  labels: {
   "app.kubernetes.io/name": "herd",
   "herd.dev/job": "fmnist"
  },
  name: "herd-scheduler"
 },
 spec: {
  ports: [
   {
    name: "grpc",
    targetPort: "grpc"
   }
  ],
  selector: {
   "app.kubernetes.io/component": "scheduler",
   "app.kubernetes.io/name": "herd",
   "herd.dev/job": "fmnist"
  }
 }
};
export const o4: core_v1.Service = {
 apiVersion: "v1",
 kind: "Service",
 metadata: {
  labels: {
   "app.kubernetes.io/name": "herd",
   "herd.dev/job": "fmnist"
  },
  name: "herd-shards"
 },
 spec: {
  clusterIP: "None",
  ports: [
   {
    name: "grpc",
    port: 7071,
    targetPort: "grpc"
   }
  ],
  publishNotReadyAddresses: true,
  selector: {
   "app.kubernetes.io/component": "shard",
   "app.kubernetes.io/name": "herd",
   "herd.dev/job": "fmnist"
  }
 }
};
export const o5: core_v1.PersistentVolumeClaim = {
 apiVersion: "v1",
 kind: "PersistentVolumeClaim",
 metadata: {
  labels: {
   "app.kubernetes.io/name": "herd",
   "herd.dev/job": "fmnist"
  },
  name: "herd-checkpoints"
 },
 spec: {
  accessModes: [
   "ReadWriteMany"
  ],
  resources: {
   requests: {
    storage: "1Gi"
   }
  }
 }
};
export const o6: apps_v1.StatefulSet = {
 apiVersion: "apps/v1",
 kind: "StatefulSet",
 metadata: {
  labels: {
   "app.kubernetes.io/name": "herd",
   "herd.dev/job": "fmnist"
  },
  name: "herd-scheduler"
 },
 spec: {
  replicas: 1,
  selector: {
   matchLabels: {
    "app.kubernetes.io/component": "scheduler",
    "app.kubernetes.io/name": "herd",
    "herd.dev/job": "fmnist"
   }
  },
  serviceName: "herd-scheduler",
  template: {
   metadata: {
    annotations: {
     "prometheus.io/path": "/metrics",
     "prometheus.io/port": "9100",
     "prometheus.io/scrape": "true"
    },
    labels: {
     "app.kubernetes.io/component": "scheduler",
     "app.kubernetes.io/name": "herd",
     "herd.dev/job": "fmnist"
    }
   },
   spec: {
    automountServiceAccountToken: false,
    containers: [
     {
      args: [
       "scheduler"
      ],
      env: [
       {
        name: "HERD_LISTEN",
        value: "127.0.0.1:7070"
       },
       {
        name: "HERD_STATE",
        value: "/var/lib/herd/state/scheduler"
       },
       {
        name: "HERD_TOKEN_FILE",
        value: "/var/run/secrets/herd/token/token"
       },
       {
        name: "HERD_HEARTBEAT_TIMEOUT",
        value: "10s"
       }
      ],
      image: "localhost/herd:dev",
      imagePullPolicy: "IfNotPresent",
      livenessProbe: {
       failureThreshold: 6,
       grpc: {
        port: 7070
       },
       periodSeconds: 10
      },
      name: "scheduler",
      ports: [
       {
        containerPort: 7070,
        name: "grpc"
       }
      ],
      readinessProbe: {
       grpc: {
        port: 7070
       },
       periodSeconds: 5
      },
      resources: {
       limits: {
        memory: "1Gi"
       },
       requests: {
        cpu: "100m",
        memory: "128Mi"
       }
      },
      securityContext: {
       allowPrivilegeEscalation: false,
       capabilities: {
        drop: [
         "ALL"
        ]
       },
       readOnlyRootFilesystem: true
      },
      startupProbe: {
       failureThreshold: 60,
       grpc: {
        port: 7070
       },
       periodSeconds: 2
      },
      volumeMounts: [
       {
        mountPath: "/var/lib/herd/state",
        name: "state"
       },
       {
        mountPath: "/var/lib/herd/checkpoints",
        name: "checkpoints"
       },
       {
        mountPath: "/var/run/secrets/herd/token",
        name: "token",
        readOnly: true
       },
       {
        mountPath: "/tmp",
        name: "tmp"
       }
      ]
     }
    ],
    dnsPolicy: "ClusterFirstWithHostNet",
    hostNetwork: true,
    securityContext: {
     fsGroup: 10001,
     runAsGroup: 10001,
     runAsNonRoot: true,
     runAsUser: 10001
    },
    serviceAccountName: "herd",
    terminationGracePeriodSeconds: 30,
    volumes: [
     {
      name: "checkpoints",
      persistentVolumeClaim: {
       claimName: "herd-checkpoints"
      }
     },
     {
      name: "token",
      secret: {
       defaultMode: 288,
       secretName: "herd-token-hgt852cdmt"
      }
     },
     {
      emptyDir: {},
      name: "tmp"
     }
    ]
   }
  },
  volumeClaimTemplates: [
   {
    metadata: {
     name: "state"
    },
    spec: {
     accessModes: [
      "ReadWriteOnce"
     ],
     resources: {
      requests: {
       storage: "100Mi"
      }
     }
    }
   }
  ]
 }
};
export const o7: apps_v1.StatefulSet = {
 apiVersion: "apps/v1",
 kind: "StatefulSet",
 metadata: {
  labels: {
   "app.kubernetes.io/name": "herd",
   "herd.dev/job": "fmnist"
  },
  name: "herd-shard"
 },
 spec: {
  podManagementPolicy: "Parallel",
  replicas: 1,
  selector: {
   matchLabels: {
    "app.kubernetes.io/component": "shard",
    "app.kubernetes.io/name": "herd",
    "herd.dev/job": "fmnist"
   }
  },
  serviceName: "herd-shards",
  template: {
   metadata: {
    annotations: {
     "prometheus.io/path": "/metrics",
     "prometheus.io/port": "9100",
     "prometheus.io/scrape": "true"
    },
    labels: {
     "app.kubernetes.io/component": "shard",
     "app.kubernetes.io/name": "herd",
     "herd.dev/job": "fmnist"
    }
   },
   spec: {
    automountServiceAccountToken: false,
    containers: [
     {
      args: [
       "server"
      ],
      env: [
       {
        name: "HERD_SCHEDULER",
        value: "127.0.0.1:7070"
       },
       {
        name: "HERD_LISTEN",
        value: "127.0.0.1:7071"
       },
       {
        name: "HERD_ADVERTISE",
        value: "127.0.0.1:7071"
       },
       {
        name: "HERD_PREEMPT_GRACE",
        value: "90s"
       },
       {
        name: "POD_NAME",
        valueFrom: {
         fieldRef: {
          fieldPath: "metadata.name"
         }
        }
       },
       {
        name: "SHARD_INDEX",
        valueFrom: {
         fieldRef: {
          fieldPath: "metadata.labels['apps.kubernetes.io/pod-index']"
         }
        }
       },
       {
        name: "HERD_JOB",
        value: "fmnist"
       },
       {
        name: "HERD_NAME",
        value: "$(POD_NAME)"
       },
       {
        name: "HERD_SHARD",
        value: "$(SHARD_INDEX)"
       },
       {
        name: "HERD_STATE",
        value: "/var/lib/herd/state/shard"
       },
       {
        name: "HERD_DURABILITY",
        value: "every-round"
       },
       {
        name: "HERD_TOKEN_FILE",
        value: "/var/run/secrets/herd/token/token"
       },
       {
        name: "HERD_WAIT_FOR_JOB",
        value: "10m"
       }
      ],
      image: "localhost/herd:dev",
      imagePullPolicy: "IfNotPresent",
      livenessProbe: {
       failureThreshold: 6,
       grpc: {
        port: 7071
       },
       periodSeconds: 10
      },
      name: "shard",
      ports: [
       {
        containerPort: 7071,
        name: "grpc"
       }
      ],
      readinessProbe: {
       grpc: {
        port: 7071
       },
       periodSeconds: 5
      },
      resources: {
       limits: {
        memory: "1Gi"
       },
       requests: {
        cpu: "100m",
        memory: "128Mi"
       }
      },
      securityContext: {
       allowPrivilegeEscalation: false,
       capabilities: {
        drop: [
         "ALL"
        ]
       },
       readOnlyRootFilesystem: true
      },
      startupProbe: {
       failureThreshold: 150,
       grpc: {
        port: 7071
       },
       periodSeconds: 2
      },
      volumeMounts: [
       {
        mountPath: "/var/lib/herd/state",
        name: "state"
       },
       {
        mountPath: "/var/lib/herd/checkpoints",
        name: "checkpoints"
       },
       {
        mountPath: "/var/run/secrets/herd/token",
        name: "token",
        readOnly: true
       },
       {
        mountPath: "/tmp",
        name: "tmp"
       }
      ]
     }
    ],
    dnsPolicy: "ClusterFirstWithHostNet",
    hostNetwork: true,
    securityContext: {
     fsGroup: 10001,
     runAsGroup: 10001,
     runAsNonRoot: true,
     runAsUser: 10001
    },
    serviceAccountName: "herd",
    terminationGracePeriodSeconds: 120,
    volumes: [
     {
      name: "checkpoints",
      persistentVolumeClaim: {
       claimName: "herd-checkpoints"
      }
     },
     {
      name: "token",
      secret: {
       defaultMode: 288,
       secretName: "herd-token-hgt852cdmt"
      }
     },
     {
      emptyDir: {},
      name: "tmp"
     }
    ]
   }
  },
  volumeClaimTemplates: [
   {
    metadata: {
     name: "state"
    },
    spec: {
     accessModes: [
      "ReadWriteOnce"
     ],
     resources: {
      requests: {
       storage: "100Mi"
      }
     }
    }
   }
  ]
 }
};
export const o8: policy_v1.PodDisruptionBudget = {
 apiVersion: "policy/v1",
 kind: "PodDisruptionBudget",
 metadata: {
  labels: {
   "app.kubernetes.io/name": "herd",
   "herd.dev/job": "fmnist"
  },
  name: "herd-shards"
 },
 spec: {
  maxUnavailable: 0,
  selector: {
   matchLabels: {
    "app.kubernetes.io/component": "shard",
    "app.kubernetes.io/name": "herd",
    "herd.dev/job": "fmnist"
   }
  }
 }
};
export const o9: batch_v1.Job = {
 apiVersion: "batch/v1",
 kind: "Job",
 metadata: {
  labels: {
   "app.kubernetes.io/name": "herd",
   "herd.dev/job": "fmnist"
  },
  name: "herd-submit"
 },
 spec: {
  backoffLimit: 8,
  podFailurePolicy: {
   rules: [
    {
     action: "FailJob",
     onExitCodes: {
      containerName: "submit",
      operator: "In",
      values: [
       2
      ]
     }
    }
   ]
  },
  template: {
   metadata: {
    labels: {
     "app.kubernetes.io/component": "submit",
     "app.kubernetes.io/name": "herd",
     "herd.dev/job": "fmnist"
    }
   },
   spec: {
    automountServiceAccountToken: false,
    containers: [
     {
      args: [
       "job",
       "submit",
       "/etc/herd/job/job.yaml"
      ],
      env: [
       {
        name: "HERD_SCHEDULER",
        value: "127.0.0.1:7070"
       },
       {
        name: "HERD_TOKEN_FILE",
        value: "/var/run/secrets/herd/token/token"
       }
      ],
      image: "localhost/herd:dev",
      imagePullPolicy: "IfNotPresent",
      name: "submit",
      resources: {
       limits: {
        memory: "256Mi"
       },
       requests: {
        cpu: "100m",
        memory: "64Mi"
       }
      },
      securityContext: {
       allowPrivilegeEscalation: false,
       capabilities: {
        drop: [
         "ALL"
        ]
       },
       readOnlyRootFilesystem: true
      },
      volumeMounts: [
       {
        mountPath: "/etc/herd/job",
        name: "jobspec",
        readOnly: true
       },
       {
        mountPath: "/var/run/secrets/herd/token",
        name: "token",
        readOnly: true
       }
      ]
     }
    ],
    dnsPolicy: "ClusterFirstWithHostNet",
    hostNetwork: true,
    restartPolicy: "Never",
    securityContext: {
     runAsGroup: 10001,
     runAsNonRoot: true,
     runAsUser: 10001
    },
    serviceAccountName: "herd",
    volumes: [
     {
      configMap: {
       name: "herd-job-4b6479m2ck"
      },
      name: "jobspec"
     },
     {
      name: "token",
      secret: {
       defaultMode: 288,
       secretName: "herd-token-hgt852cdmt"
      }
     }
    ]
   }
  }
 }
};
export const o10: batch_v1.Job = {
 apiVersion: "batch/v1",
 kind: "Job",
 metadata: {
  labels: {
   "app.kubernetes.io/name": "herd",
   "herd.dev/job": "fmnist"
  },
  name: "herd-workers"
 },
 spec: {
  backoffLimitPerIndex: 3,
  completionMode: "Indexed",
  completions: 2,
  parallelism: 2,
  podFailurePolicy: {
   rules: [
    {
     action: "FailJob",
     onExitCodes: {
      containerName: "worker",
      operator: "In",
      values: [
       2
      ]
     }
    },
    {
     action: "Ignore",
     onPodConditions: [
      {
       status: "True",
       type: "DisruptionTarget"
      }
     ]
    }
   ]
  },
  template: {
   metadata: {
    annotations: {
     "prometheus.io/path": "/metrics",
     "prometheus.io/port": "9100",
     "prometheus.io/scrape": "true"
    },
    labels: {
     "app.kubernetes.io/component": "worker",
     "app.kubernetes.io/name": "herd",
     "herd.dev/job": "fmnist"
    }
   },
   spec: {
    automountServiceAccountToken: false,
    containers: [
     {
      args: [
       "worker"
      ],
      env: [
       {
        name: "HERD_SCHEDULER",
        value: "127.0.0.1:7070"
       },
       {
        name: "HERD_PREEMPT_GRACE",
        value: "90s"
       },
       {
        name: "HERD_THREADS",
        value: "1"
       },
       {
        name: "JOB_COMPLETION_INDEX",
        valueFrom: {
         fieldRef: {
          fieldPath: "metadata.annotations['batch.kubernetes.io/job-completion-index']"
         }
        }
       },
       {
        name: "HERD_JOB",
        value: "fmnist"
       },
       {
        name: "HERD_RANK",
        value: "$(JOB_COMPLETION_INDEX)"
       },
       {
        name: "HERD_NAME",
        value: "worker-$(JOB_COMPLETION_INDEX)"
       },
       {
        name: "HERD_TOKEN_FILE",
        value: "/var/run/secrets/herd/token/token"
       },
       {
        name: "HERD_WAIT_FOR_JOB",
        value: "10m"
       },
       {
        name: "HERD_TRANSPORT",
        value: "ucx"
       }
      ],
      image: "localhost/herd:dev",
      imagePullPolicy: "IfNotPresent",
      name: "worker",
      resources: {
       limits: {
        memory: "2Gi"
       },
       requests: {
        cpu: "500m",
        memory: "512Mi"
       }
      },
      securityContext: {
       allowPrivilegeEscalation: false,
       capabilities: {
        drop: [
         "ALL"
        ]
       },
       readOnlyRootFilesystem: true
      },
      volumeMounts: [
       {
        mountPath: "/var/lib/herd/checkpoints",
        name: "checkpoints"
       },
       {
        mountPath: "/var/run/secrets/herd/token",
        name: "token",
        readOnly: true
       },
       {
        mountPath: "/dev/shm",
        name: "shm"
       },
       {
        mountPath: "/tmp",
        name: "tmp"
       }
      ]
     }
    ],
    dnsPolicy: "ClusterFirstWithHostNet",
    hostNetwork: true,
    restartPolicy: "Never",
    securityContext: {
     fsGroup: 10001,
     runAsGroup: 10001,
     runAsNonRoot: true,
     runAsUser: 10001
    },
    serviceAccountName: "herd",
    terminationGracePeriodSeconds: 120,
    volumes: [
     {
      emptyDir: {
       medium: "Memory",
       sizeLimit: "256Mi"
      },
      name: "shm"
     },
     {
      name: "checkpoints",
      persistentVolumeClaim: {
       claimName: "herd-checkpoints"
      }
     },
     {
      name: "token",
      secret: {
       defaultMode: 288,
       secretName: "herd-token-hgt852cdmt"
      }
     },
     {
      emptyDir: {},
      name: "tmp"
     }
    ]
   }
  }
 }
};
export const o11: networking_v1.NetworkPolicy = {
 apiVersion: "networking.k8s.io/v1",
 kind: "NetworkPolicy",
 metadata: {
  labels: {
   "app.kubernetes.io/name": "herd",
   "herd.dev/job": "fmnist"
  },
  name: "herd-job"
 },
 spec: {
  ingress: [
   {
    from: [
     {
      podSelector: {
       matchLabels: {
        "app.kubernetes.io/name": "herd",
        "herd.dev/job": "fmnist"
       }
      }
     }
    ]
   }
  ],
  podSelector: {
   matchLabels: {
    "app.kubernetes.io/name": "herd",
    "herd.dev/job": "fmnist"
   }
  },
  policyTypes: [
   "Ingress"
  ]
 }
};
