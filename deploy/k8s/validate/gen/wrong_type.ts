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
  "job.yaml": "name: fmnist\nmode: ps_async\nstaleness: 4\nworkers: 8\nservers: 4\nseed: 7\noptimizer: {name: momentum, learning_rate: 0.05, momentum: 0.9}\ntraining: {model: cnn, epochs: 5, batch_size: 64}\ncheckpoint:\n  dir: /var/lib/herd/checkpoints/fmnist\n  every: 10m\n  keep_last: 3\n  timeout: 2m\n"
 },
 kind: "ConfigMap",
 metadata: {
  labels: {
   "app.kubernetes.io/name": "herd",
   "herd.dev/job": "fmnist"
  },
  name: "herd-job-b57cdd2gft"
 }
};
export const o2: core_v1.Service = {
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
    port: 7070,
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
export const o3: core_v1.Service = {
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
export const o4: core_v1.PersistentVolumeClaim = {
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
    storage: "20Gi"
   }
  }
 }
};
export const o5: apps_v1.StatefulSet = {
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
        value: "0.0.0.0:7070"
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
       },
       {
        name: "HERD_TLS_CERT",
        value: "/var/run/secrets/herd/tls/tls.crt"
       },
       {
        name: "HERD_TLS_KEY",
        value: "/var/run/secrets/herd/tls/tls.key"
       }
      ],
      image: "localhost/herd:dev",
      livenessProbe: {
       failureThreshold: 6,
       periodSeconds: 10,
       tcpSocket: {
        port: 7070
       }
      },
      name: "scheduler",
      ports: [
       {
        containerPort: 7070,
        name: "grpc"
       }
      ],
      readinessProbe: {
       periodSeconds: 5,
       tcpSocket: {
        port: 7070
       }
      },
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
      startupProbe: {
       failureThreshold: 60,
       periodSeconds: 2,
       tcpSocket: {
        port: 7070
       }
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
       },
       {
        mountPath: "/var/run/secrets/herd/tls",
        name: "tls",
        readOnly: true
       }
      ]
     }
    ],
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
       secretName: "herd-token"
      }
     },
     {
      emptyDir: {},
      name: "tmp"
     },
     {
      name: "tls",
      secret: {
       defaultMode: 288,
       secretName: "herd-tls"
      }
     }
    ]
   }
  },
  volumeClaimTemplates: [
   {
    metadata: {
     labels: {
      "app.kubernetes.io/name": "herd",
      "herd.dev/job": "fmnist"
     },
     name: "state"
    },
    spec: {
     accessModes: [
      "ReadWriteOnce"
     ],
     resources: {
      requests: {
       storage: "1Gi"
      }
     }
    }
   }
  ]
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
  name: "herd-shard"
 },
 spec: {
  podManagementPolicy: "Parallel",
  replicas: "4",
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
        name: "HERD_THREADS",
        value: "24"
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
        name: "HERD_SCHEDULER",
        value: "herd-scheduler:7070"
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
        name: "HERD_LISTEN",
        value: "0.0.0.0:7071"
       },
       {
        name: "HERD_ADVERTISE",
        value: "$(POD_NAME).herd-shards:7071"
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
       },
       {
        name: "HERD_PREEMPT_GRACE",
        value: "150s"
       },
       {
        name: "HERD_TLS_CERT",
        value: "/var/run/secrets/herd/tls/tls.crt"
       },
       {
        name: "HERD_TLS_KEY",
        value: "/var/run/secrets/herd/tls/tls.key"
       },
       {
        name: "HERD_SCHEDULER_CA",
        value: "/var/run/secrets/herd/tls/ca.crt"
       }
      ],
      image: "registry.example.com/herd:0.1.0",
      livenessProbe: {
       failureThreshold: 6,
       periodSeconds: 10,
       tcpSocket: {
        port: 7071
       }
      },
      name: "shard",
      ports: [
       {
        containerPort: 7071,
        name: "grpc"
       }
      ],
      readinessProbe: {
       periodSeconds: 5,
       tcpSocket: {
        port: 7071
       }
      },
      resources: {
       limits: {
        memory: "8Gi"
       },
       requests: {
        cpu: "1",
        memory: "2Gi"
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
       periodSeconds: 2,
       tcpSocket: {
        port: 7071
       }
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
       },
       {
        mountPath: "/var/run/secrets/herd/tls",
        name: "tls",
        readOnly: true
       }
      ]
     }
    ],
    securityContext: {
     fsGroup: 10001,
     runAsGroup: 10001,
     runAsNonRoot: true,
     runAsUser: 10001
    },
    serviceAccountName: "herd",
    terminationGracePeriodSeconds: 180,
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
       secretName: "herd-token"
      }
     },
     {
      emptyDir: {},
      name: "tmp"
     },
     {
      name: "tls",
      secret: {
       defaultMode: 288,
       secretName: "herd-tls"
      }
     }
    ]
   }
  },
  volumeClaimTemplates: [
   {
    metadata: {
     labels: {
      "app.kubernetes.io/name": "herd",
      "herd.dev/job": "fmnist"
     },
     name: "state"
    },
    spec: {
     accessModes: [
      "ReadWriteOnce"
     ],
     resources: {
      requests: {
       storage: "10Gi"
      }
     }
    }
   }
  ]
 }
};
export const o7: policy_v1.PodDisruptionBudget = {
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
export const o8: batch_v1.Job = {
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
        value: "herd-scheduler:7070"
       },
       {
        name: "HERD_TOKEN_FILE",
        value: "/var/run/secrets/herd/token/token"
       },
       {
        name: "HERD_TLS_CA",
        value: "/var/run/secrets/herd/tls/ca.crt"
       }
      ],
      image: "localhost/herd:dev",
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
       },
       {
        mountPath: "/var/run/secrets/herd/tls",
        name: "tls",
        readOnly: true
       }
      ]
     }
    ],
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
       name: "herd-job-b57cdd2gft"
      },
      name: "jobspec"
     },
     {
      name: "token",
      secret: {
       defaultMode: 288,
       secretName: "herd-token"
      }
     },
     {
      name: "tls",
      secret: {
       defaultMode: 288,
       secretName: "herd-tls"
      }
     }
    ]
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
  name: "herd-workers"
 },
 spec: {
  backoffLimitPerIndex: 3,
  completionMode: "Indexed",
  completions: 8,
  parallelism: 8,
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
        name: "HERD_THREADS",
        value: "4"
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
        name: "HERD_SCHEDULER",
        value: "herd-scheduler:7070"
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
        name: "HERD_PREEMPT_GRACE",
        value: "150s"
       },
       {
        name: "HERD_TRANSPORT",
        value: "ucx"
       },
       {
        name: "HERD_SCHEDULER_CA",
        value: "/var/run/secrets/herd/tls/ca.crt"
       },
       {
        name: "HERD_SERVER_CA",
        value: "/var/run/secrets/herd/tls/ca.crt"
       }
      ],
      image: "localhost/herd:dev",
      name: "worker",
      resources: {
       limits: {
        memory: "16Gi"
       },
       requests: {
        cpu: "4",
        memory: "8Gi"
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
       },
       {
        mountPath: "/var/run/secrets/herd/tls",
        name: "tls",
        readOnly: true
       }
      ]
     }
    ],
    restartPolicy: "Never",
    securityContext: {
     fsGroup: 10001,
     runAsGroup: 10001,
     runAsNonRoot: true,
     runAsUser: 10001
    },
    serviceAccountName: "herd",
    terminationGracePeriodSeconds: 180,
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
       secretName: "herd-token"
      }
     },
     {
      emptyDir: {
       medium: "Memory",
       sizeLimit: "1Gi"
      },
      name: "shm"
     },
     {
      emptyDir: {},
      name: "tmp"
     },
     {
      name: "tls",
      secret: {
       defaultMode: 288,
       secretName: "herd-tls"
      }
     }
    ]
   }
  }
 }
};
export const o10: networking_v1.NetworkPolicy = {
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
